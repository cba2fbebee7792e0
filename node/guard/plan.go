package guard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// Off, Auto and SQLText are the Kinds a Plan uses besides Prompt, Path
// and SQL.
const (
	// Off skips an argument.
	Off Kind = iota + SQL + 1
	// Auto chooses an argument's kind from its name (KindFor).
	Auto
	// SQLText is a value that goes into a query and may also reach an
	// LLM: ScanSQL and Scan both.
	SQLText
)

var kindNames = [...]string{"prompt", "path", "sql", "off", "auto", "sql+prompt"}

// String returns the kind's name: "prompt", "path", "sql", "off", "auto"
// or "sql+prompt".
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
	return Off, fmt.Errorf("guard: kind %q: want one of prompt, path, sql, sql+prompt, off, auto", s)
}

// Plan says which string arguments of one skill's calls the guard scans,
// and how. The node's dispatch holds one per skill (docs/guard.md, "What
// is scanned"); a nil *Plan scans nothing.
type Plan struct {
	// Fields gives the kind of arguments by name (Off skips one, Auto
	// chooses by name). They win over Rest.
	Fields map[string]Kind
	// Rest is the kind of every other argument: Auto (the
	// default of DefaultPlan: chosen by KindFor), Off (only Fields are
	// scanned) or a fixed kind.
	Rest Kind
	// SQLish says the skill talks to a database (SQLishSkill): Auto then
	// reads every argument that is not a path as SQLText.
	SQLish bool
}

// DefaultPlan is the plan of a skill that says nothing about the guard:
// every string argument (and every string nested in an array or object
// argument, as Collect says) is scanned, its kind taken from the input
// schema's "format" when it names one (SchemaKinds), else from its name
// (KindFor). A nil or
// unreadable schema just gives no formats.
func DefaultPlan(skill string, tags []string, schema []byte) *Plan {
	return &Plan{Fields: SchemaKinds(schema), Rest: Auto, SQLish: SQLishSkill(skill, tags)}
}

// KindOf is the kind p gives the argument name: Prompt, Path, SQL,
// SQLText or Off (Auto resolved).
func (p *Plan) KindOf(name string) Kind {
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
)

// KindFor chooses how an argument named name is scanned when nothing else
// says: Path for file-like names (path, file, filename, filepath, dir,
// directory, folder, and names ending in one of them: source_path,
// config_file); SQLText (the SQL rules and the prompt rules) for
// query-part names (sql, where, filter, filter_value, order_by,
// condition, statement, and names ending in _sql, _where, _clause,
// _condition) and for every other argument of a skill that talks to a
// database (sqlish: its values go into queries); Prompt for everything
// else. A bare "name" is Prompt: a person's or a skill's name far more
// often than a file's.
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
	case sqlNames[whole] || sqlLastWords[last] || strings.HasPrefix(whole, "sql") || strings.HasPrefix(whole, "filter") || sqlish:
		return SQLText
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
	// Args are in field-name order (at each level of nesting), array
	// elements in their order.
	Args []Arg
	// Bytes is how many bytes Scan will scan (each text counts up to
	// MaxScan, all of them up to 1 MiB).
	Bytes int
	notes []Finding
	// deep and full say that the notes hold the depth note and the count
	// note: one of each per call.
	deep, full bool
}

// maxFieldName is the most bytes of an Arg's Field (the path of a nested
// string): a longer one is cut, ending in "…".
const maxFieldName = 128

// Collect takes out of a JSON object of arguments the strings plan scans.
// An argument's kind is plan.Fields[name], else plan.Rest; Off skips it
// whole. A string argument is taken as is; an array or object argument is
// walked into, down to 8 levels of nesting below the argument (maxArgDepth),
// taking at most 256 values of each array (maxArgStrings) and 4096 strings
// of the call in all (maxCallStrings). A nested string's Field is its path,
// the member names joined by "." (array elements add nothing:
// "plan.subtasks.request"), and its kind is the argument's, or, for an
// argument of kind Auto, KindFor the name of the member it is in (of the
// argument itself for a string or an array of strings). What a bound
// leaves out adds a Low "truncated_scan" note, so that block mode refuses
// text it did not scan (a structure nested deeper that holds no string
// adds none). It fails only when args is not a JSON object; a nil plan
// collects nothing.
func Collect(args []byte, plan *Plan) (Collected, error) {
	var c Collected
	if plan == nil {
		return c, nil
	}
	ms, err := sortedMembers(args)
	if err != nil {
		return c, fmt.Errorf("guard: arguments are not a JSON object: %w", err)
	}
	for _, m := range ms {
		kind, ok := plan.Fields[m.name]
		if !ok {
			kind = plan.Rest
		}
		if kind == Off {
			continue
		}
		c.walk(plan, m.name, m.name, kind, m.raw, 0)
	}
	return c, nil
}

// member is one member of a JSON object: its name and its raw value.
type member struct {
	name string
	raw  []byte
}

// sortedMembers returns the members of the JSON object data sorted by
// name, the last of a duplicate name alone (as in encoding/json).
func sortedMembers(data []byte) ([]member, error) {
	var ms []member
	if err := members(data, func(name string, raw []byte) { ms = append(ms, member{name, raw}) }); err != nil {
		return nil, err
	}
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].name < ms[j].name })
	out := ms[:0]
	for i, m := range ms {
		if i+1 < len(ms) && ms[i+1].name == m.name {
			continue
		}
		out = append(out, m)
	}
	return out, nil
}

// walk takes the strings of the JSON value raw, at depth levels below its
// argument, into c: field is its path, leaf the name of the member it is
// in, kind its argument's kind (Auto: KindFor leaf).
func (c *Collected) walk(plan *Plan, field, leaf string, kind Kind, raw []byte, depth int) {
	switch raw[0] {
	case '"':
		if len(c.Args) >= maxCallStrings {
			if !c.full {
				c.full = true
				c.notes = append(c.notes, Finding{Vector: VectorTruncated, Level: Low, Field: field,
					Match: fmt.Sprintf("scanned the first %d strings of the arguments", maxCallStrings)})
			}
			return
		}
		k := kind
		if k == Auto {
			k = KindFor(leaf, plan.SQLish)
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			c.add(field, k, s)
		}
	case '[', '{':
		if depth >= maxArgDepth {
			if !c.deep && hasText(raw) {
				c.deep = true
				c.notes = append(c.notes, Finding{Vector: VectorTruncated, Level: Low, Field: field,
					Match: fmt.Sprintf("text nested more than %d levels deep: not scanned", maxArgDepth)})
			}
			return
		}
		if raw[0] == '{' {
			ms, err := sortedMembers(raw)
			if err != nil {
				return // members checked the syntax of the whole arguments
			}
			for _, m := range ms {
				c.walk(plan, fieldPath(field, m.name), m.name, kind, m.raw, depth+1)
			}
			return
		}
		n, total := 0, 0
		elements(raw, func(el []byte) {
			total++
			if el[0] != '"' && el[0] != '[' && el[0] != '{' {
				return
			}
			if n++; n <= maxArgStrings {
				c.walk(plan, field, leaf, kind, el, depth+1)
			}
		})
		if n > maxArgStrings {
			c.notes = append(c.notes, Finding{Vector: VectorTruncated, Level: Low, Field: field,
				Match: fmt.Sprintf("scanned %d values of an array of %d elements", maxArgStrings, total)})
		}
	}
}

// fieldPath is the Field of the member name of the value at field: at
// most maxFieldName bytes.
func fieldPath(field, name string) string {
	if len(field) >= maxFieldName {
		return field // already cut
	}
	p := field + "." + name
	if len(p) <= maxFieldName {
		return p
	}
	const ell = "…"
	return p[:cutBefore(p, maxFieldName-len(ell))] + ell
}

// elements calls fn with each element of the JSON array data, whose syntax
// has been checked (members).
func elements(data []byte, fn func(el []byte)) {
	i := skipSpace(data, 1)
	if i >= len(data) || data[i] == ']' {
		return
	}
	for i < len(data) {
		end, err := skipValue(data, i, 0)
		if err != nil {
			return
		}
		fn(data[i:end])
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ',' {
			return
		}
		i = skipSpace(data, i+1)
	}
}

// hasText says whether the JSON value data, whose syntax has been checked,
// holds a string value that is not empty (a member name is not one): a
// string not followed by ':'. It reads data once.
func hasText(data []byte) bool {
	for i := 0; i < len(data); i++ {
		if data[i] != '"' {
			continue
		}
		end, err := skipValue(data, i, 0)
		if err != nil {
			return true // cannot tell: say there is
		}
		if j := skipSpace(data, end); end-i > 2 && (j >= len(data) || data[j] != ':') {
			return true
		}
		i = end - 1
	}
	return false
}

// Empty says whether c holds nothing to scan and nothing left out: its
// Scan would find nothing.
func (c *Collected) Empty() bool { return len(c.Args) == 0 && len(c.notes) == 0 }

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
		case SQLText:
			add(a.Field, ScanSQL(a.Text))
			add(a.Field, Scan(a.Text).Findings)
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

// maxNesting bounds the nesting members walks through.
const maxNesting = 10000

// members calls fn with the name and the raw value of each member of the
// JSON object in data, in order, without decoding the values: a string
// value is scanned for its end only. It fails when data is not one JSON
// object (with only white space around it); it checks the syntax of what
// it walks through, but not that strings without escapes are free of
// control characters, nor that they are valid UTF-8 (json.Unmarshal of a
// value that is scanned does).
func members(data []byte, fn func(name string, raw []byte)) error {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return fmt.Errorf("want an object, found %s", peek(data, i))
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		if j := skipSpace(data, i+1); j != len(data) {
			return fmt.Errorf("%s after the object", peek(data, j))
		}
		return nil
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return fmt.Errorf("want a member name at byte %d, found %s", i, peek(data, i))
		}
		end, err := skipValue(data, i, 0)
		if err != nil {
			return err
		}
		key := data[i:end]
		var name string
		if bytes.IndexByte(key, '\\') < 0 && utf8.Valid(key) {
			name = string(key[1 : len(key)-1])
		} else if err := json.Unmarshal(key, &name); err != nil {
			return fmt.Errorf("member name at byte %d: %w", i, err)
		}
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return fmt.Errorf("want ':' at byte %d, found %s", i, peek(data, i))
		}
		i = skipSpace(data, i+1)
		start := i
		if i, err = skipValue(data, i, 0); err != nil {
			return err
		}
		fn(name, data[start:i])
		i = skipSpace(data, i)
		if i >= len(data) {
			return errors.New("unexpected end of input in the object")
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			if j := skipSpace(data, i+1); j != len(data) {
				return fmt.Errorf("%s after the object", peek(data, j))
			}
			return nil
		default:
			return fmt.Errorf("want ',' or '}' at byte %d, found %s", i, peek(data, i))
		}
	}
}

// peek names what is at data[i] for an error message.
func peek(data []byte, i int) string {
	if i >= len(data) {
		return "the end of input"
	}
	return fmt.Sprintf("%q", data[i:min(i+8, len(data))])
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the JSON value that starts at data[i].
func skipValue(data []byte, i, depth int) (int, error) {
	if i >= len(data) {
		return i, errors.New("unexpected end of input: want a value")
	}
	if depth > maxNesting {
		return i, fmt.Errorf("nested deeper than %d", maxNesting)
	}
	switch c := data[i]; {
	case c == '"':
		// The common string has no escape: find its end at memchr's speed.
		// Control characters are not looked for there (json.Unmarshal of
		// a value that is scanned refuses them).
		if k := bytes.IndexByte(data[i+1:], '"'); k >= 0 && bytes.IndexByte(data[i+1:i+1+k], '\\') < 0 {
			return i + 2 + k, nil
		}
		for j := i + 1; j < len(data); j++ {
			switch data[j] {
			case '\\':
				if j+1 >= len(data) {
					return len(data), errors.New("unexpected end of input in a string")
				}
				switch data[j+1] {
				case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
					j++
				case 'u':
					if j+5 >= len(data) {
						return len(data), errors.New("unexpected end of input in a string")
					}
					if _, ok := parseHex(string(data[j+2 : j+6])); !ok {
						return j, fmt.Errorf("bad \\u escape in a string at byte %d", j)
					}
					j += 5
				default:
					return j, fmt.Errorf("bad escape %q in a string at byte %d", data[j:j+2], j)
				}
			case '"':
				return j + 1, nil
			default:
				if data[j] < 0x20 {
					return j, fmt.Errorf("control character in a string at byte %d", j)
				}
			}
		}
		return len(data), errors.New("unexpected end of input in a string")
	case c == '{' || c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		j := skipSpace(data, i+1)
		if j < len(data) && data[j] == closer {
			return j + 1, nil
		}
		for {
			var err error
			if c == '{' {
				if j >= len(data) || data[j] != '"' {
					return j, fmt.Errorf("want a member name at byte %d, found %s", j, peek(data, j))
				}
				if j, err = skipValue(data, j, depth+1); err != nil {
					return j, err
				}
				j = skipSpace(data, j)
				if j >= len(data) || data[j] != ':' {
					return j, fmt.Errorf("want ':' at byte %d, found %s", j, peek(data, j))
				}
				j = skipSpace(data, j+1)
			}
			if j, err = skipValue(data, j, depth+1); err != nil {
				return j, err
			}
			j = skipSpace(data, j)
			if j >= len(data) {
				return j, errors.New("unexpected end of input")
			}
			if data[j] == closer {
				return j + 1, nil
			}
			if data[j] != ',' {
				return j, fmt.Errorf("want ',' or %q at byte %d, found %s", closer, j, peek(data, j))
			}
			j = skipSpace(data, j+1)
		}
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit {
				return i + len(lit), nil
			}
		}
		return i, fmt.Errorf("bad literal at byte %d: %s", i, peek(data, i))
	case c == '-' || c >= '0' && c <= '9':
		return skipNumber(data, i)
	default:
		return i, fmt.Errorf("want a value at byte %d, found %s", i, peek(data, i))
	}
}

// skipNumber returns the end of the JSON number at data[i], checking its
// grammar: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
func skipNumber(data []byte, i int) (int, error) {
	start := i
	digits := func() bool {
		n := 0
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
			n++
		}
		return n > 0
	}
	bad := func() (int, error) { return i, fmt.Errorf("bad number at byte %d: %s", start, peek(data, start)) }
	if data[i] == '-' {
		i++
	}
	if i < len(data) && data[i] == '0' {
		i++
	} else if !digits() {
		return bad()
	}
	if i < len(data) && data[i] == '.' {
		i++
		if !digits() {
			return bad()
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if !digits() {
			return bad()
		}
	}
	return i, nil
}
