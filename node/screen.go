package node

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcpv2/mcpv2/node/guard"
	"github.com/mcpv2/mcpv2/node/store"
	"github.com/mcpv2/mcpv2/protocol"
)

// GuardMode is what a node does with what the prompt-injection guard finds
// in the text arguments of skills that reach an LLM (docs/guard.md).
type GuardMode int

const (
	// GuardBlock refuses calls at or above the threshold and flags the rest.
	GuardBlock GuardMode = iota
	// GuardFlag runs every call and audits what the guard found.
	GuardFlag
	// GuardOff does not scan.
	GuardOff
)

// smallScan is the most bytes of text a call's scan may hold and still
// be a short scan: one that takes a short slot of scanSlots, so that it
// never waits behind a long one.
const smallScan = 4 << 10

// scanSlots bound the guard scans that run at once on a node, so the
// guard's CPU is bounded: long scans (over smallScan bytes) take one of
// long, short ones one of short.
type scanSlots struct {
	long, short chan struct{}
}

// newScanSlots makes the scan slots of a node of procs cores (scanSlotsFor).
func newScanSlots(procs int) scanSlots {
	long, short := scanSlotsFor(procs)
	return scanSlots{long: make(chan struct{}, long), short: make(chan struct{}, short)}
}

// scanSlotsFor is how many long and short guard scans run at once on a
// node of procs cores: half the cores in all, split in two halves (the
// long scans get the odd one), and at least one of each, so a node of at
// most three cores runs one long and one short scan at once.
func scanSlotsFor(procs int) (long, short int) {
	all := max(1, procs/2)
	short = max(1, all/2)
	return max(1, all-short), short
}

// GuardModes are the names ParseGuardMode accepts, in GuardMode order.
var GuardModes = []string{"block", "flag", "off"}

func (m GuardMode) String() string {
	if int(m) < len(GuardModes) {
		return GuardModes[m]
	}
	return fmt.Sprintf("GuardMode(%d)", int(m))
}

// ParseGuardMode reads --guard: "block" (also ""), "flag" or "off".
func ParseGuardMode(s string) (GuardMode, error) {
	if s == "" {
		return GuardBlock, nil
	}
	for i, name := range GuardModes {
		if strings.EqualFold(s, name) {
			return GuardMode(i), nil
		}
	}
	return 0, fmt.Errorf("guard mode %q: want one of %s", s, strings.Join(GuardModes, ", "))
}

// verdict is what the guard found in one call's arguments; the zero value
// means it found nothing (or did not look).
type verdict struct {
	threat   guard.Level
	findings []guard.Finding
	blocked  bool
}

// auditFields copies v into an audit record.
func (v *verdict) auditFields(rec *store.AuditRecord) {
	if v == nil || len(v.findings) == 0 {
		return
	}
	rec.Threat = v.threat.String()
	n := min(len(v.findings), store.MaxAuditFindings)
	rec.Findings = make([]store.AuditFinding, n)
	for i, f := range v.findings[:n] {
		rec.Findings[i] = store.AuditFinding{Vector: f.Vector, Level: f.Level.String(), Field: f.Field}
	}
	if v.blocked {
		rec.Outcome = "blocked"
	}
}

// screen runs the guard over the arguments of a call of skill, as the
// skill's guard.Plan says (every string argument unless the skill opted
// out), when the guard is on. It returns what it found,
// and an error when the call is to be refused: a finding at or above the
// threshold in block mode. Arguments that are not a JSON object are left
// to the skill's schema check.
func (n *Node) screen(ctx context.Context, skill string, args json.RawMessage) (*verdict, *protocol.Error) {
	if n.guardMode == GuardOff {
		return nil, nil
	}
	plan := n.reg.GuardPlan(skill)
	if plan == nil {
		return nil, nil
	}
	col, err := guard.Collect(args, plan)
	if err != nil || col.Empty() {
		return nil, nil
	}
	// A scan is linear in its input but not cheap: text built of the rules'
	// own words costs up to about 1 s of CPU per 256 KiB scanned, and
	// about 2 ms per KiB at most of short text (docs/guard.md, "Cost").
	// Every scan takes one of scanSlots, half the cores in all, so callers
	// that send such text slow the scanned calls, not the whole node; long
	// scans (over smallScan bytes) and short ones have slots of their own,
	// so the short text of most calls never waits behind a long scan.
	release, perr := n.scanSlotFor(ctx, skill, col.Bytes)
	if perr != nil {
		return nil, perr
	}
	defer release()
	res := col.Scan()
	if res.IsSafe {
		return nil, nil
	}
	v := &verdict{threat: res.ThreatLevel, findings: res.Findings}
	if n.guardMode != GuardBlock {
		return v, nil
	}
	// Block mode fails closed: text the guard could not scan whole (a field
	// over guard.MaxScan, more than the arguments' scan budget, text that
	// spent the work budget) is refused, or an injection in its middle
	// would go through with a low finding.
	for _, f := range res.Findings {
		if f.Vector == guard.VectorTruncated {
			v.blocked = true
			where := ""
			if f.Field != "" {
				where = " " + f.Field
			}
			return v, &protocol.Error{Code: protocol.CodeNotPermitted,
				Message: fmt.Sprintf("blocked by the prompt-injection guard: it could not scan all of%s (%s), and this node refuses what it cannot scan. "+
					"Send text of at most %d bytes per argument, or ask the node's operator (--guard flag lets such calls through)", where, f.Match, guard.MaxScan),
				Data: map[string]any{"skill": skill, "reason": "guard", "threat_level": res.ThreatLevel.String(), "findings": res.Findings}}
		}
	}
	if res.ThreatLevel < n.guardMin {
		return v, nil
	}
	v.blocked = true
	vectors := make([]string, 0, len(res.Findings))
	for _, f := range res.Findings {
		if f.Level >= n.guardMin {
			where := ""
			if f.Field != "" {
				where = " in " + f.Field
			}
			vectors = append(vectors, fmt.Sprintf("%s (%s)%s", f.Vector, f.Level, where))
		}
	}
	return v, &protocol.Error{Code: protocol.CodeNotPermitted,
		Message: fmt.Sprintf("blocked by the prompt-injection guard: %s; this node blocks threats at %s and above (its --guard-threshold). "+
			"If this is a false positive, rephrase the text, or ask the node's operator", strings.Join(vectors, ", "), n.guardMin),
		Data: map[string]any{"skill": skill, "reason": "guard", "threat_level": res.ThreatLevel.String(), "findings": res.Findings}}
}

// scanSlot waits for one of the long scanSlots, for a guard scan on
// behalf of skill that may be long (the scan skill, SecurityScan), and
// returns its release. A call whose context ends first gets -32005.
func (n *Node) scanSlot(ctx context.Context, skill string) (release func(), perr *protocol.Error) {
	return n.scanSlotFor(ctx, skill, smallScan+1)
}

// scanSlotFor waits for one of scanSlots for a guard scan of size bytes on
// behalf of skill (a short slot for at most smallScan bytes, else a long
// one) and returns its release. A call whose context ends first gets
// -32005.
func (n *Node) scanSlotFor(ctx context.Context, skill string, size int) (release func(), perr *protocol.Error) {
	slots := n.scanSlots.long
	if size <= smallScan {
		slots = n.scanSlots.short
	}
	select {
	case slots <- struct{}{}: // a free slot wins over an ended context
		return func() { <-slots }, nil
	default:
	}
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	case <-ctx.Done():
		return nil, &protocol.Error{Code: protocol.CodeRateLimited,
			Message: "busy: the prompt-injection guard is scanning other calls and this one ended before its turn; retry",
			Data:    map[string]any{"skill": skill, "retry_after_ms": 1000}}
	}
}
