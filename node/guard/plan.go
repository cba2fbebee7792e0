package guard

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Off and Auto are the Kinds a Plan uses besides Prompt, Path and SQL.
const (
	// Off skips an argument.
	Off Kind = iota + SQL + 1
	// Auto chooses an argument's kind from its name (KindFor).
	Auto
)

var kindNames = [...]string{"prompt", "path", "sql", "off", "auto"}

// String returns the kind's name: "prompt", "path", "sql", "off" or "auto".
func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// ParseKind reads a kind's name as String writes it, ignoring case.
func ParseKind(s string) (Kind, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	for i, n := range kindNames {
		if t == n {
			return Kind(i), nil
		}
	}
	return Off, fmt.Errorf("guard: kind %q: want one of prompt, path, sql, off, auto", s)
}

// Plan says which string arguments of one skill's calls the guard scans,
// and how. The node's dispatch holds one per skill (docs/guard.md, "What
// is scanned"); a nil *Plan scans nothing.
type Plan struct {
	// Fields gives the kind of arguments by name (Off skips one, Auto
	// chooses by name). They win over Rest.
	Fields map[string]Kind
	// Rest is the kind of every other top-level argument: Auto (the
	// default of DefaultPlan: chosen by KindFor), Off (only Fields are
	// scanned) or a fixed kind.
	Rest Kind
	// SQLish says the skill talks to a database (SQLishSkill): Auto then
	// reads its query-like arguments (query, q, search, value…) as SQL.
	SQLish bool
}

// DefaultPlan is the plan of a skill that says nothing about the guard:
// every top-level string argument (and every string in an array that is
// one) is scanned, its kind taken from the input schema's "format" when it
// names one (SchemaKinds), else from its name (KindFor). A nil or
// unreadable schema just gives no formats.
func DefaultPlan(skill string, tags []string, schema []byte) *Plan {
	return &Plan{Fields: SchemaKinds(schema), Rest: Auto, SQLish: SQLishSkill(skill, tags)}
}

// kindOf is the kind p gives the argument name.
func (p *Plan) kindOf(name string) Kind {
	k, ok := p.Fields[name]
	if !ok {
		k = p.Rest
	}
	if k == Auto {
		k = KindFor(name, p.SQLish)
	}
	return k
}

// sqlSkillWords mark a skill that talks to a database, as a word of its
// name or of one of its tags.
var sqlSkillWords = map[string]bool{"sql": true, "database": true, "db": true, "mysql": true, "postgres": true,
	"postgresql": true, "sqlite": true, "mariadb": true, "mssql": true, "oracle": true, "tsql": true}

// SQLishSkill says whether a skill named name with tags talks to a
// database: a word of its name or of a tag (split at _ - . and spaces) is
// sql, database, db, mysql, postgres, postgresql, sqlite, mariadb, mssql,
// oracle or tsql. "query" alone does not count: web_search's query is not
// SQL.
func SQLishSkill(name string, tags []string) bool {
	for _, s := range append([]string{name}, tags...) {
		for _, w := range nameWords(s) {
			if sqlSkillWords[w] {
				return true
			}
		}
	}
	return false
}

// nameWords splits an identifier into lower-case words at _ - . space and
// lower-to-upper case changes (filePath: file, path).
func nameWords(s string) []string {
	var out []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	prevLower := false
	for _, r := range s {
		switch {
		case r == '_' || r == '-' || r == '.' || r == ' ' || r == '/':
			flush()
			prevLower = false
			continue
		case r >= 'A' && r <= 'Z':
			if prevLower {
				flush()
			}
			r += 'a' - 'A'
			prevLower = false
		default:
			prevLower = r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		}
		cur.WriteRune(r)
	}
	flush()
	return out
}

// Argument names by kind, for KindFor: whole names (after lower-casing and
// dropping _ and -) and last words.
var (
	pathNames = map[string]bool{"path": true, "file": true, "filename": true, "filepath": true, "dir": true,
		"directory": true, "folder": true, "dirname": true, "pathname": true, "src": true, "dest": true,
		"destination": true, "source_file": true, "target_file": true}
	pathLastWords = map[string]bool{"path": true, "file": true, "filename": true, "dir": true, "directory": true,
		"folder": true, "filepath": true, "pathname": true}
	sqlNames = map[string]bool{"sql": true, "where": true, "whereclause": true, "filter": true, "filtervalue": true,
		"filterfield": true, "orderby": true, "sortby": true, "groupby": true, "having": true, "condition": true,
		"statement": true, "predicate": true}
	sqlLastWords = map[string]bool{"sql": true, "where": true, "clause": true, "condition": true, "predicate": true}
	// sqlishNames are SQL only in a skill that talks to a database.
	sqlishNames = map[string]bool{"query": true, "q": true, "search": true, "value": true, "expression": true,
		"table": true, "column": true, "field": true, "sort": true, "order": true, "term": true, "keyword": true}
)

// KindFor chooses how an argument named name is scanned when nothing else
// says: Path for file-like names (path, file, filename, filepath, dir,
// directory, folder, and names ending in one of them: source_path,
// config_file), SQL for query-part names (sql, where, filter,
// filter_value, order_by, condition, statement, and names ending in _sql,
// _where, _clause, _condition), and, in a skill that talks to a database
// (sqlish), also for query-like names (query, q, search, value, table,
// column, field, sort, term, and names ending in one of them); Prompt for
// everything else. A bare "name" is Prompt: a person's or a skill's name
// far more often than a file's.
func KindFor(name string, sqlish bool) Kind {
	ws := nameWords(name)
	if len(ws) == 0 {
		return Prompt
	}
	whole := strings.Join(ws, "")
	last := ws[len(ws)-1]
	switch {
	case pathNames[whole] || pathNames[strings.Join(ws, "_")] || pathLastWords[last]:
		return Path
	case sqlNames[whole] || sqlLastWords[last] || strings.HasPrefix(whole, "sql") || strings.HasPrefix(whole, "filter"):
		return SQL
	case sqlish && (sqlishNames[whole] || sqlishNames[last]):
		return SQL
	}
	return Prompt
}

// maxSchema is the most bytes of an input schema SchemaKinds reads.
const maxSchema = 1 << 20

// SchemaKinds reads the kinds an input schema gives its top-level
// properties through "format" (of the property, or of its "items" for an
// array): "path", "file-path", "filepath" or "filename" → Path; "sql",
// "sql-query" or "sql-where" → SQL; "prompt" or "text" → Prompt;
// "binary", "byte", "base64", "password" → Off (data, not text for an
// LLM: scanning base64 as prose finds nothing and costs). Properties with
// no such format are left out, and so is everything of a schema that is
// not a JSON object or longer than 1 MiB.
func SchemaKinds(schema []byte) map[string]Kind {
	if len(schema) == 0 || len(schema) > maxSchema {
		return nil
	}
	type prop struct {
		Format string `json:"format"`
		Items  *struct {
			Format string `json:"format"`
		} `json:"items"`
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	var out map[string]Kind
	for name, raw := range s.Properties {
		var p prop
		if json.Unmarshal(raw, &p) != nil {
			continue
		}
		f := p.Format
		if f == "" && p.Items != nil {
			f = p.Items.Format
		}
		k, ok := formatKinds[strings.ToLower(f)]
		if !ok {
			continue
		}
		if out == nil {
			out = map[string]Kind{}
		}
		out[name] = k
	}
	return out
}

var formatKinds = map[string]Kind{
	"path": Path, "file-path": Path, "filepath": Path, "filename": Path,
	"sql": SQL, "sql-query": SQL, "sql-where": SQL,
	"prompt": Prompt, "text": Prompt,
	"binary": Off, "byte": Off, "base64": Off, "password": Off,
}

// Arg is one string argument a Plan selected, with how to scan it.
type Arg struct {
	Field string
	Kind  Kind
	Text  string
}

// Collected is what Collect took out of one call's arguments: the strings
// to scan, their total size, and notes on what it left out.
type Collected struct {
	// Args are in field-name order, array elements in their order.
	Args []Arg
	// Bytes is how many bytes Scan will scan (each text counts up to
	// MaxScan, all of them up to 1 MiB).
	Bytes int
	notes []Finding
}

// Collect takes out of a JSON object of arguments the strings plan scans:
// each top-level string argument whose kind (plan.Fields, else plan.Rest,
// Auto resolved by KindFor) is not Off, and the strings of an array that
// is such an argument (at most 256 of them; more adds a Low
// "truncated_scan" note). Nested objects are not looked into. It fails
// only when args is not a JSON object; a nil plan collects nothing.
func Collect(args []byte, plan *Plan) (Collected, error) {
	var c Collected
	if plan == nil {
		return c, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil || obj == nil {
		what := "null"
		if err != nil {
			what = err.Error()
		}
		return c, fmt.Errorf("guard: arguments are not a JSON object: %s", what)
	}
	names := make([]string, 0, len(obj))
	for n, raw := range obj {
		if len(raw) > 0 && (raw[0] == '"' || raw[0] == '[') {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		kind := plan.kindOf(name)
		if kind == Off {
			continue
		}
		raw := obj[name]
		var s string
		if raw[0] == '"' {
			if json.Unmarshal(raw, &s) == nil {
				c.add(name, kind, s)
			}
			continue
		}
		var arr []json.RawMessage
		if json.Unmarshal(raw, &arr) != nil {
			continue
		}
		n := 0
		for _, el := range arr {
			if len(el) == 0 || el[0] != '"' {
				continue
			}
			if n >= maxArgStrings {
				c.notes = append(c.notes, Finding{Vector: VectorTruncated, Level: Low, Field: name,
					Match: fmt.Sprintf("scanned %d strings of an array of %d elements", maxArgStrings, len(arr))})
				break
			}
			if json.Unmarshal(el, &s) == nil {
				c.add(name, kind, s)
				n++
			}
		}
	}
	return c, nil
}

func (c *Collected) add(field string, kind Kind, s string) {
	c.Args = append(c.Args, Arg{Field: field, Kind: kind, Text: s})
	c.Bytes = min(c.Bytes+min(len(s), MaxScan), maxArgBytes)
}

// Scan scans each collected string as its kind says, sets Field on each
// finding, and merges them into one Result (SanitizedInput empty). Past
// 1 MiB of text in all, the rest is not scanned and each string left adds
// a Low "truncated_scan" finding.
func (c *Collected) Scan() Result {
	res := Result{IsSafe: true, Findings: []Finding{}}
	add := func(name string, fs []Finding) {
		for _, f := range fs {
			f.Field = name
			res.ThreatLevel = max(res.ThreatLevel, f.Level)
			res.Findings = append(res.Findings, f)
		}
	}
	budget := maxArgBytes
	for _, a := range c.Args {
		if budget <= 0 {
			add(a.Field, []Finding{{Vector: VectorTruncated, Level: Low, Match: "argument budget spent: not scanned"}})
			continue
		}
		budget -= min(len(a.Text), MaxScan)
		switch a.Kind {
		case Path:
			add(a.Field, ScanPath(a.Text))
		case SQL:
			add(a.Field, ScanSQL(a.Text))
		default:
			add(a.Field, Scan(a.Text).Findings)
		}
	}
	for _, f := range c.notes {
		add(f.Field, []Finding{f})
	}
	res.IsSafe = len(res.Findings) == 0
	return res
}

// ScanPlan is Collect and Scan in one.
func ScanPlan(args []byte, plan *Plan) (Result, error) {
	c, err := Collect(args, plan)
	if err != nil {
		return Result{}, err
	}
	return c.Scan(), nil
}
