package node

import (
	"maps"
	"slices"
)

// PolicyView is the policy in force, as the dashboard's Access page and
// GET /v1/access show it: who may run what, and the per-skill limits.
type PolicyView struct {
	// File is the policy file ("" when the node runs without one).
	File string `json:"file"`
	// Grants maps a grant key (a PeerID, "via:<PeerID>", "key:<NAME>",
	// "oidc:<sub>", "scope:<name>", "http" or "*") to its skills ("*":
	// every skill), keys sorted in the JSON.
	Grants map[string][]string `json:"grants"`
	// Open are the skills everyone may run without a grant.
	Open []string `json:"open"`
	// Limits maps a skill ("*": each skill without its own) to its
	// per-caller rate, as the file wrote it ("10/m").
	Limits map[string]string `json:"limits"`
	// Secret says the node has a --secret: its holders may run every skill.
	Secret bool `json:"secret"`
}

// PolicyView returns the policy in force (a copy). Safe for concurrent use.
func (n *Node) PolicyView() PolicyView {
	v := PolicyView{File: n.cfg.PolicyFile, Grants: map[string][]string{}, Limits: map[string]string{},
		Open: slices.Concat(openByDefault, []string{"tools/list", "agent/card"}), Secret: len(n.secret) > 0}
	for k, g := range n.policy.grants {
		v.Grants[k] = slices.Clone(g)
	}
	maps.Copy(v.Limits, n.policy.rates)
	return v
}
