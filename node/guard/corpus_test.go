package guard

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The acceptance numbers of the corpus (docs/guard.md).
const (
	minDetection    = 0.90 // per prompt vector, and for paths and SQL
	maxFalsePosRate = 0.03 // over the benign prompts
	maxToolFPRate   = 0.05 // over the benign paths and queries
	// The held-out set (round 4, docs/guard.md) was written after the
	// rules and its attacks were never tuned on; its floors only catch a
	// regression.
	minHoldoutDetection = 0.65
	maxHoldoutFPRate    = 0.10
)

// promptVectors are the seven prompt vectors, in table order.
var promptVectors = []string{
	VectorInstructionOverride, VectorPersonaHijacking, VectorPromptExtraction, VectorXMLTagInjection,
	VectorMarkdownDelimiter, VectorEncoding, VectorDataExfiltration,
}

type labelled struct {
	Vector string `json:"vector"`
	Text   string `json:"text"`
	Note   string `json:"note"`
	Attack bool   `json:"attack"`
}

func loadJSONL(t testing.TB, name string) []labelled {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []labelled
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var l labelled
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s:%d: %v", name, n, err)
		}
		if l.Text == "" {
			t.Fatalf("%s:%d: no text", name, n)
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// detected is the decision rule for an attack in the corpus: a finding of
// its labelled vector, or any finding of level High or above.
func detected(res Result, vector string) bool {
	for _, f := range res.Findings {
		if f.Vector == vector || f.Level >= High {
			return true
		}
	}
	return false
}

// acted is the false-positive rule for a benign text: the default policy
// would act on it, that is some finding is Medium or above.
func acted(fs []Finding) bool {
	for _, f := range fs {
		if f.Level >= Medium {
			return true
		}
	}
	return false
}

type row struct {
	name           string
	attempts, hits int
	benign, fps    int
}

func rate(n, d int) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}

func describe(fs []Finding) string {
	var parts []string
	for _, f := range fs {
		parts = append(parts, fmt.Sprintf("%s(%q)", f.Vector, f.Match))
	}
	return strings.Join(parts, ", ")
}

// promptRows scores an injection and a benign corpus.
func promptRows(t *testing.T, injName, benName string) (map[string]*row, *row, []string) {
	inj := loadJSONL(t, injName)
	ben := loadJSONL(t, benName)
	rows := map[string]*row{}
	for _, v := range promptVectors {
		rows[v] = &row{name: v}
	}
	var notes []string
	for _, l := range inj {
		rw, ok := rows[l.Vector]
		if !ok {
			t.Fatalf("%s: unknown vector %q", injName, l.Vector)
		}
		rw.attempts++
		res := Scan(l.Text)
		if detected(res, l.Vector) {
			rw.hits++
		} else {
			notes = append(notes, fmt.Sprintf("missed %s: %q [%s]", l.Vector, l.Text, describe(res.Findings)))
		}
	}
	b := &row{name: "benign"}
	for _, l := range inj {
		if has(Scan(l.Text), VectorTruncated) {
			t.Errorf("%s: %q ran out of the work budget", injName, l.Text)
		}
	}
	for _, l := range ben {
		b.benign++
		res := Scan(l.Text)
		if has(res, VectorTruncated) {
			t.Errorf("%s: %q ran out of the work budget", benName, l.Text)
		}
		if acted(res.Findings) {
			b.fps++
			notes = append(notes, fmt.Sprintf("false positive (%s): %q [%s]", l.Note, l.Text, describe(res.Findings)))
		}
	}
	return rows, b, notes
}

// toolRow scores a path or SQL corpus.
func toolRow(t *testing.T, name, label string, scan func(string) []Finding) (*row, []string) {
	rw := &row{name: label}
	var notes []string
	for _, l := range loadJSONL(t, name) {
		fs := scan(l.Text)
		if l.Attack {
			rw.attempts++
			if acted(fs) {
				rw.hits++
			} else {
				notes = append(notes, fmt.Sprintf("missed %s: %q (%s)", label, l.Text, l.Note))
			}
			continue
		}
		rw.benign++
		if acted(fs) {
			rw.fps++
			notes = append(notes, fmt.Sprintf("false positive %s: %q (%s) [%s]", label, l.Text, l.Note, describe(fs)))
		}
	}
	return rw, notes
}

// TestCorpus scores the guard against the committed corpus and fails
// unless each prompt vector's detection rate is at least 90%, the benign
// false-positive rate at most 3%, and the path and SQL rows meet their
// floors. With -v it prints the markdown table of docs/guard.md.
func TestCorpus(t *testing.T) {
	rows, ben, notes := promptRows(t, "injections.jsonl", "benign.jsonl")
	pathRow, pn := toolRow(t, "paths.jsonl", "path (ScanPath)", ScanPath)
	sqlRow, sn := toolRow(t, "sql.jsonl", "sql (ScanSQL)", ScanSQL)
	hRows, hBen, hNotes := promptRows(t, "holdout_injections.jsonl", "holdout_benign.jsonl")
	notes = append(append(notes, pn...), sn...)

	if ben.benign < 160 {
		t.Errorf("benign corpus has %d texts, want at least 160", ben.benign)
	}
	total := 0
	for _, v := range promptVectors {
		rw := rows[v]
		total += rw.attempts
		if rw.attempts < 20 {
			t.Errorf("%s: %d attempts in the corpus, want at least 20", v, rw.attempts)
		}
		if r := rate(rw.hits, rw.attempts); r < minDetection {
			t.Errorf("%s: detection %.1f%% (%d/%d), want at least %.0f%%", v, 100*r, rw.hits, rw.attempts, 100*minDetection)
		}
	}
	if total < 160 {
		t.Errorf("injection corpus has %d texts, want at least 160", total)
	}
	if r := rate(ben.fps, ben.benign); r > maxFalsePosRate {
		t.Errorf("false positives %.1f%% (%d/%d), want at most %.0f%%", 100*r, ben.fps, ben.benign, 100*maxFalsePosRate)
	}
	for _, rw := range []*row{pathRow, sqlRow} {
		if rw.attempts < 20 || rw.benign < 20 {
			t.Errorf("%s corpus: %d attacks and %d benign, want at least 20 each", rw.name, rw.attempts, rw.benign)
		}
		if r := rate(rw.hits, rw.attempts); r < minDetection {
			t.Errorf("%s: detection %.1f%% (%d/%d), want at least %.0f%%", rw.name, 100*r, rw.hits, rw.attempts, 100*minDetection)
		}
		if r := rate(rw.fps, rw.benign); r > maxToolFPRate {
			t.Errorf("%s: false positives %.1f%% (%d/%d), want at most %.0f%%", rw.name, 100*r, rw.fps, rw.benign, 100*maxToolFPRate)
		}
	}
	hAtt, hHit := 0, 0
	for _, rw := range hRows {
		hAtt += rw.attempts
		hHit += rw.hits
	}
	if r := rate(hHit, hAtt); r < minHoldoutDetection {
		t.Errorf("held-out detection %.1f%% (%d/%d), want at least %.0f%%", 100*r, hHit, hAtt, 100*minHoldoutDetection)
	}
	if r := rate(hBen.fps, hBen.benign); r > maxHoldoutFPRate {
		t.Errorf("held-out false positives %.1f%% (%d/%d), want at most %.0f%%", 100*r, hBen.fps, hBen.benign, 100*maxHoldoutFPRate)
	}

	if !testing.Verbose() && !t.Failed() {
		return
	}
	var b strings.Builder
	b.WriteString("| corpus | vector | attempts | detected | rate | benign | false positives | FP rate |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|\n")
	line := func(corpus string, rw *row) {
		if rw.attempts > 0 {
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %.1f%% |", corpus, rw.name, rw.attempts, rw.hits, 100*rate(rw.hits, rw.attempts))
		} else {
			fmt.Fprintf(&b, "| %s | %s | | | |", corpus, rw.name)
		}
		if rw.benign > 0 {
			fmt.Fprintf(&b, " %d | %d | %.1f%% |\n", rw.benign, rw.fps, 100*rate(rw.fps, rw.benign))
		} else {
			b.WriteString(" | | |\n")
		}
	}
	sum := func(corpus string, rs map[string]*row, bn *row) {
		all := &row{name: "**all prompt vectors**"}
		for _, v := range promptVectors {
			line(corpus, rs[v])
			all.attempts += rs[v].attempts
			all.hits += rs[v].hits
		}
		all.benign, all.fps = bn.benign, bn.fps
		line(corpus, all)
	}
	sum("main", rows, ben)
	line("main", pathRow)
	line("main", sqlRow)
	sum("held-out", hRows, hBen)
	t.Logf("\n%s", b.String())
	sort.Strings(notes)
	for _, n := range notes {
		t.Log(n)
	}
	for _, n := range hNotes {
		t.Log("held-out " + n)
	}
}
