package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/mcpv2/mcpv2/protocol"
)

// openByDefault are the skills every caller may use without a grant (SPEC
// §6); the methods tools/list and agent/card need no grant at all.
var openByDefault = []string{"ping"}

// Policy grants skills to callers (SPEC §6): to a PeerID, to "http" (every
// anonymous edge session) or to "*" (everyone). The zero Policy grants
// nothing beyond the open defaults. A Policy is immutable once loaded and so
// safe for concurrent use.
type Policy struct {
	grants map[string][]string // PeerID, "http" or "*" → skill names or "*"
}

// policyFile is the on-disk form:
//
//	{"grants": {"12D3KooW…": ["ask", "upload_file"], "12D3KooX…": ["*"],
//	            "http": ["translate_history"], "*": ["get_skill"]}}
type policyFile struct {
	Grants map[string][]string `json:"grants"`
}

// maxPolicyFile caps the policy file.
const maxPolicyFile = 1 << 20

// LoadPolicy reads a policy file. A missing file is an empty policy when
// mustExist is false; any other problem names the file and the reason.
func LoadPolicy(path string, mustExist bool) (*Policy, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && !mustExist {
		return &Policy{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPolicyFile+1))
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	if len(data) > maxPolicyFile {
		return nil, fmt.Errorf("policy file %s: larger than %d bytes", path, maxPolicyFile)
	}
	return ParsePolicy(path, data)
}

// ParsePolicy parses the policy file format; name is used in errors.
func ParsePolicy(name string, data []byte) (*Policy, error) {
	var pf policyFile
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pf); err != nil {
		return nil, fmt.Errorf("policy file %s: %w", name, err)
	}
	for who, skills := range pf.Grants {
		if who != "*" && who != protocol.PolicyHTTP && !protocol.LooksLikePeerID(who) {
			return nil, fmt.Errorf("policy file %s: grant key %q is neither a PeerID, \"http\" (anonymous edge sessions) nor \"*\" (everyone)", name, who)
		}
		for _, s := range skills {
			if s == "" {
				return nil, fmt.Errorf("policy file %s: grant for %s has an empty skill name", name, who)
			}
		}
	}
	return &Policy{grants: pf.Grants}, nil
}

// Allows reports whether the policy key who (a PeerID, or "http" for an
// anonymous edge session) may run skill: an open skill, a grant to who, or a
// grant to "*".
func (p *Policy) Allows(who, skill string) bool {
	if slices.Contains(openByDefault, skill) {
		return true
	}
	for _, k := range []string{who, "*"} {
		if g, ok := p.grants[k]; ok && (slices.Contains(g, skill) || slices.Contains(g, "*")) {
			return true
		}
	}
	return false
}

// AccessSummary says in one line who may run what on the node, from its
// policy and secret, for its "ready" log line: e.g. "open to everyone:
// ping, tools/list, agent/card; HTTP sessions also: translate_history;
// PeerIDs granted skills: 2 (policy /data/policy.json); secret holders
// (--secret): every skill". Safe for concurrent use.
func (n *Node) AccessSummary() string {
	everyone := []string{"tools/list", "agent/card"}
	if g := n.policy.grants["*"]; slices.Contains(g, "*") {
		everyone = append([]string{"every skill"}, everyone...)
	} else {
		everyone = append(slices.Concat(openByDefault, g), everyone...)
	}
	parts := []string{"open to everyone: " + strings.Join(everyone, ", ")}
	if g := n.policy.grants[protocol.PolicyHTTP]; len(g) > 0 {
		if slices.Contains(g, "*") {
			g = []string{"every skill"}
		}
		parts = append(parts, "HTTP sessions also: "+strings.Join(g, ", "))
	}
	peers := 0
	for k := range n.policy.grants {
		if k != "*" && k != protocol.PolicyHTTP {
			peers++
		}
	}
	parts = append(parts, fmt.Sprintf("PeerIDs granted skills: %d (policy %s)", peers, n.cfg.PolicyFile))
	if len(n.secret) > 0 {
		parts = append(parts, "secret holders (--secret): every skill")
	} else {
		parts = append(parts, "no --secret: no mesh secret holders")
	}
	return strings.Join(parts, "; ")
}
