package skills

import (
	"context"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mcpv2/mcpv2/node/guard"
)

// ScanArgs are the arguments of the scan skill.
type ScanArgs struct {
	Text string `json:"text" jsonschema:"the text to scan"`
	Kind string `json:"kind,omitempty" jsonschema:"how to read it: prompt (text for an LLM, the default), path (a file path) or sql (a query)"`
}

// ScanGate admits one guard scan: it waits for a turn and returns its
// release, or an error (a *protocol.Error) when the call may not wait.
type ScanGate func(ctx context.Context, skill string) (release func(), err error)

// ScanSkill is the name of the skill RegisterScan adds.
const ScanSkill = "scan"

// RegisterScan adds the scan skill: the node's prompt-injection guard run
// over a text on request, the same scanner that screens the arguments of
// ask and process_instructions (docs/guard.md). Each scan passes gate
// first, so that scans on request share the node's bound on scans.
func RegisterScan(r *Registry, gate ScanGate) {
	Add(r, ScanSkill, "Scan a text for prompt injection (or a path for traversal, a query for SQL injection): is_safe, threat_level, findings, sanitized_input.",
		[]string{"security", "guard"}, func(ctx context.Context, a ScanArgs) (guard.Result, error) {
			release, err := gate(ctx, ScanSkill)
			if err != nil {
				return guard.Result{}, err
			}
			defer release()
			return scan(a), nil
		}, enumProp("kind", "prompt", "path", "sql"), maxLength("text", guard.MaxScan), ReadOnly())
	// Its text is what the caller wants examined, attacks included, and
	// reaches nothing but the scanner: the guard does not screen it.
	if err := r.SetGuardPlan(ScanSkill, nil); err != nil {
		panic(err.Error())
	}
}

func scan(a ScanArgs) guard.Result {
	var fs []guard.Finding
	switch a.Kind {
	case "path":
		fs = guard.ScanPath(a.Text)
	case "sql":
		fs = guard.ScanSQL(a.Text)
	default:
		return guard.Scan(a.Text)
	}
	res := guard.Result{IsSafe: len(fs) == 0, Findings: fs, SanitizedInput: a.Text}
	if res.Findings == nil {
		res.Findings = []guard.Finding{}
	}
	for _, f := range fs {
		res.ThreatLevel = max(res.ThreatLevel, f.Level)
	}
	return res
}

func maxLength(name string, n int) SchemaOption {
	return func(s *jsonschema.Schema) { s.Properties[name].MaxLength = &n }
}
