// Package guard is the prompt-injection scanner. It looks at text that is
// about to reach an LLM (the prompt arguments of skills), at file-name
// arguments and at query arguments, and reports what it finds as findings
// with a vector name and a threat level. It is pure: text in, findings out;
// the node's dispatch decides what to do with them (see docs/guard.md).
//
// The prompt vectors are instruction_override, persona_hijacking,
// system_prompt_extraction, xml_tag_injection, markdown_delimiter_injection,
// encoding_obfuscation and data_exfiltration; file arguments get
// path_traversal and sensitive_path, query arguments sql_injection.
//
// Matching uses Go's regexp (RE2, linear time) over normalised copies of
// the text (folded: NFKD, lower case, invisible characters dropped,
// homoglyphs mapped; letters only, with leetspeak; escapes decoded; base64,
// hex and Unicode-tag payloads decoded). Each rule runs anchored where the
// words its matches start with occur, and every run is charged to a work
// budget, so the cost of any input is linear in its length; at most MaxScan
// bytes of one text are scanned. docs/guard.md has the vectors, the corpus
// and its numbers, and the limits. Everything here is safe for concurrent
// use: the rules are compiled once and never written.
package guard

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// Level is a threat level. The zero value is None.
type Level int

// The threat levels, in increasing order.
const (
	None Level = iota
	Low
	Medium
	High
	Critical
)

var levelNames = [...]string{"none", "low", "medium", "high", "critical"}

// String returns the level's name: "none", "low", "medium", "high" or
// "critical" (and "level(N)" for a value out of range).
func (l Level) String() string {
	if l >= 0 && int(l) < len(levelNames) {
		return levelNames[l]
	}
	return fmt.Sprintf("level(%d)", int(l))
}

// ParseLevel parses a level name, ignoring case and surrounding space.
func ParseLevel(s string) (Level, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	for i, n := range levelNames {
		if t == n {
			return Level(i), nil
		}
	}
	return None, fmt.Errorf("guard: unknown threat level %q (want one of none, low, medium, high, critical)", s)
}

// MarshalText encodes the level as its name; a level out of range is an
// error.
func (l Level) MarshalText() ([]byte, error) {
	if l < 0 || int(l) >= len(levelNames) {
		return nil, fmt.Errorf("guard: threat level %d out of range", int(l))
	}
	return []byte(levelNames[l]), nil
}

// UnmarshalText decodes a level name as ParseLevel does.
func (l *Level) UnmarshalText(b []byte) error {
	v, err := ParseLevel(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// Finding is one thing the guard found.
type Finding struct {
	// Vector names the kind of attack, one of the Vector* constants.
	Vector string `json:"vector"`
	// Level is the vector's threat level.
	Level Level `json:"level"`
	// Match is the text that matched, at most MaxMatch bytes (cut on a rune
	// boundary, with "…" in the last three). For a finding inside a decoded
	// payload (base64, hex, Unicode tags) it is the decoded text.
	Match string `json:"match"`
	// Field is the argument the finding is in, set by ScanArgs.
	Field string `json:"field,omitempty"`
}

// Result is the outcome of scanning one text (Scan) or one call's
// arguments (ScanArgs).
type Result struct {
	// IsSafe is true when there is no finding at all.
	IsSafe bool `json:"is_safe"`
	// ThreatLevel is the highest level among the findings, None when safe.
	ThreatLevel Level `json:"threat_level"`
	// Findings are in the order of their place in the text; never nil.
	Findings []Finding `json:"findings"`
	// SanitizedInput is the text with each matched span replaced by
	// "[removed: <vector>]" and invisible characters (zero-width, bidi
	// controls, Unicode tags) removed. ScanArgs leaves it empty.
	SanitizedInput string `json:"sanitized_input"`
}

// MaxScan is how many bytes of one text are scanned. Of a longer text the
// first and the last MaxScan/2 bytes are scanned and a Low finding
// "truncated_scan" is added. The same finding is added when a text built to
// make the rules work hard runs out of the scan's work budget (see
// docs/guard.md); no text of the corpora or of this repository's documents
// comes near it.
const MaxScan = 256 << 10

// MaxMatch is the most bytes a Finding.Match holds.
const MaxMatch = 80

// maxFindings caps the findings of one Scan; the ones kept are the highest
// levels first, so ThreatLevel is never understated.
const maxFindings = 64

// Scan scans text for the prompt-injection vectors (not for path or SQL
// attacks: see ScanPath and ScanSQL).
func Scan(text string) Result {
	sc := &scanner{budget: decodeBudget}
	var hits []hit
	if len(text) <= MaxScan {
		hits = sc.scan(text, 0)
	} else {
		head := cutBefore(text, MaxScan/2)
		tail := len(text) - MaxScan/2
		for tail < len(text) && !utf8.RuneStart(text[tail]) {
			tail++
		}
		hits = sc.scan(text[:head], 0)
		for _, h := range sc.scan(text[tail:], 0) {
			h.s += tail
			h.e += tail
			hits = append(hits, h)
		}
		hits = append(hits, hit{vector: VectorTruncated, s: -1, e: -1,
			match: fmt.Sprintf("scanned the first %d and last %d of %d bytes", head, len(text)-tail, len(text))})
	}
	if sc.exhausted {
		hits = append(hits, hit{vector: VectorTruncated, s: -1, e: -1,
			match: fmt.Sprintf("work budget spent: %d bytes not scanned by every rule", len(text))})
	}
	hits = dedup(hits)
	res := Result{IsSafe: len(hits) == 0, Findings: make([]Finding, 0, len(hits))}
	for _, h := range hits {
		lv := vectorLevels[h.vector]
		if lv > res.ThreatLevel {
			res.ThreatLevel = lv
		}
		res.Findings = append(res.Findings, Finding{Vector: h.vector, Level: lv, Match: clip(h.match)})
	}
	res.SanitizedInput = sanitize(text, hits)
	return res
}

// cutBefore returns the largest rune boundary of s at or below n.
func cutBefore(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// clip shortens s to at most MaxMatch bytes on a rune boundary, ending in
// "…" when it was cut.
func clip(s string) string {
	if len(s) <= MaxMatch {
		return s
	}
	const ell = "…"
	return s[:cutBefore(s, MaxMatch-len(ell))] + ell
}

// sanitize returns text with the spans of hits replaced by a marker naming
// the vector, and invisible characters removed elsewhere.
func sanitize(text string, hits []hit) string {
	type span struct {
		s, e   int
		vector string
		level  Level
	}
	var spans []span
	for _, h := range hits {
		if h.s < 0 || h.e <= h.s || h.e > len(text) {
			continue
		}
		spans = append(spans, span{h.s, h.e, h.vector, vectorLevels[h.vector]})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].s < spans[j].s })
	var merged []span
	for _, sp := range spans {
		if n := len(merged); n > 0 && sp.s < merged[n-1].e {
			last := &merged[n-1]
			last.e = max(last.e, sp.e)
			if sp.level > last.level {
				last.level, last.vector = sp.level, sp.vector
			}
			continue
		}
		merged = append(merged, sp)
	}
	var b strings.Builder
	b.Grow(len(text))
	pos := 0
	for _, sp := range merged {
		writeVisible(&b, text[pos:sp.s])
		b.WriteString("[removed: ")
		b.WriteString(sp.vector)
		b.WriteString("]")
		pos = sp.e
	}
	writeVisible(&b, text[pos:])
	return b.String()
}

// writeVisible writes s without its invisible characters.
func writeVisible(b *strings.Builder, s string) {
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] < 0x80 {
			i++
		}
		b.WriteString(s[:i])
		s = s[i:]
		if s == "" {
			return
		}
		r, size := utf8.DecodeRuneInString(s)
		if !(invisible(r) && r != utf8.RuneError) {
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
}

// Kind says how ScanArgs treats an argument.
type Kind int

// The kinds of argument.
const (
	// Prompt text that reaches an LLM: Scan.
	Prompt Kind = iota
	// Path names a file: ScanPath.
	Path
	// SQL is a query or a value put into one: ScanSQL.
	SQL
)

// Bounds of ScanArgs.
const (
	// maxArgStrings is how many values of one array are scanned.
	maxArgStrings = 256
	// maxArgBytes is how many bytes of strings ScanArgs scans in all.
	maxArgBytes = 4 * MaxScan
	// maxArgDepth is how many levels of nested objects and arrays below
	// an argument Collect walks into.
	maxArgDepth = 8
	// maxCallStrings is how many strings Collect takes from one call's
	// arguments in all.
	maxCallStrings = 4096
)

// ScanArgs scans the named fields of a JSON object of arguments, each as
// its Kind says (Off skips it): a string field, and the strings inside an
// array or object that is a field's value (walked into as Collect says),
// sets Field on each finding to the argument's name (or the path of a
// nested string), and merges the findings into one Result (SanitizedInput
// empty). Fields that are missing, and numbers and booleans, are ignored.
// At most 1 MiB of strings is scanned in all; the rest, and what Collect's
// bounds leave out, adds a Low "truncated_scan" finding. It fails only when
// args is not a JSON object. It is ScanPlan with a plan of these fields
// alone; the node scans with each skill's Plan (DefaultPlan).
func ScanArgs(args []byte, fields map[string]Kind) (Result, error) {
	return ScanPlan(args, &Plan{Fields: fields, Rest: Off})
}
