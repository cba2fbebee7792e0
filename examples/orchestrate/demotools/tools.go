package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// calculatorIn are calculator's arguments.
type calculatorIn struct {
	Operation string   `json:"operation"`
	A         *float64 `json:"a"`
	B         *float64 `json:"b"`
}

// calculatorOut is calculator's result; B is absent for sqrt.
type calculatorOut struct {
	Operation string   `json:"operation"`
	A         float64  `json:"a"`
	B         *float64 `json:"b,omitempty"`
	Result    float64  `json:"result"`
}

// calculatorOps are the operations, in the order messages list them.
var calculatorOps = []string{"add", "subtract", "multiply", "divide", "power", "sqrt", "modulo"}

// calculator does one arithmetic operation on a and b (a alone for sqrt).
func calculator(_ config, args []byte) (any, error) {
	var in calculatorIn
	if err := decodeArgs(args, &in); err != nil {
		return nil, err
	}
	op := strings.ToLower(strings.TrimSpace(in.Operation))
	switch {
	case op == "":
		return nil, fmt.Errorf("missing operation (one of %s)", strings.Join(calculatorOps, ", "))
	case !slices.Contains(calculatorOps, op):
		return nil, fmt.Errorf("unknown operation %q (one of %s)", in.Operation, strings.Join(calculatorOps, ", "))
	case in.A == nil:
		return nil, errors.New(`missing "a", the first operand`)
	}
	a := *in.A
	if op == "sqrt" {
		if in.B != nil {
			return nil, errors.New(`sqrt takes only "a"; drop "b"`)
		}
		if a < 0 {
			return nil, fmt.Errorf("sqrt of a negative number (%g) is not a real number", a)
		}
		return calculatorOut{Operation: op, A: a, Result: math.Sqrt(a)}, nil
	}
	if in.B == nil {
		return nil, fmt.Errorf(`missing "b", the second operand of %s`, op)
	}
	b := *in.B
	var r float64
	switch op {
	case "add":
		r = a + b
	case "subtract":
		r = a - b
	case "multiply":
		r = a * b
	case "divide":
		if b == 0 {
			return nil, errors.New("division by zero")
		}
		r = a / b
	case "modulo":
		if b == 0 {
			return nil, errors.New("modulo by zero")
		}
		r = math.Mod(a, b)
	case "power":
		r = math.Pow(a, b)
	}
	switch {
	case math.IsNaN(r):
		return nil, fmt.Errorf("%s of %g and %g is not a real number", op, a, b)
	case math.IsInf(r, 0):
		return nil, fmt.Errorf("%s of %g and %g overflows", op, a, b)
	}
	return calculatorOut{Operation: op, A: a, B: &b, Result: r}, nil
}

// weatherIn are weather's arguments.
type weatherIn struct {
	City string `json:"city"`
}

// weatherOut is weather's result.
type weatherOut struct {
	City         string  `json:"city"`
	TemperatureC float64 `json:"temperature_c"`
	Conditions   string  `json:"conditions"`
	Humidity     int     `json:"humidity"`
	Source       string  `json:"source"`
}

// weather answers from the offline sample: known cities by name or alias,
// case-insensitive.
func weather(_ config, args []byte) (any, error) {
	var in weatherIn
	if err := decodeArgs(args, &in); err != nil {
		return nil, err
	}
	key := cityKey(in.City)
	if key == "" {
		return nil, fmt.Errorf(`missing "city" (known: %s)`, knownCities())
	}
	for _, c := range sampleWeather {
		if slices.Contains(c.aliases, key) {
			return weatherOut{City: c.name, TemperatureC: c.tempC, Conditions: c.conditions,
				Humidity: c.humidity, Source: "offline sample data"}, nil
		}
	}
	return nil, fmt.Errorf("no weather for %q (known: %s)", in.City, knownCities())
}

// cityKey normalizes a city name for lookup: lower case, single spaces,
// no surrounding punctuation, and the part before a comma ("Tokyo, Japan").
func cityKey(s string) string {
	s, _, _ = strings.Cut(s, ",")
	s = strings.ToLower(strings.Join(strings.Fields(s), " "))
	s = strings.TrimFunc(s, func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSpace(r) })
	s = strings.TrimPrefix(s, "the ")
	return s
}

// knownCities lists the sample's cities for messages.
func knownCities() string {
	names := make([]string, 0, len(sampleWeather))
	for _, c := range sampleWeather {
		names = append(names, c.name)
	}
	return strings.Join(names, ", ")
}

// databaseIn are database_query's arguments.
type databaseIn struct {
	Action    string `json:"action"`
	QueryType string `json:"query_type"` // the seed's name of action
	// FilterField and FilterValue are the seed's one filter: a field of
	// filterFields and its value.
	FilterField string          `json:"filter_field"`
	FilterValue json.RawMessage `json:"filter_value"`
	Department  string          `json:"department"`
	Role        string          `json:"role"`
	MinSalary   *float64        `json:"min_salary"`
	MaxSalary   *float64        `json:"max_salary"`
	Where       string          `json:"where"`
}

// databaseOut is database_query's result; Rows is absent for count.
type databaseOut struct {
	Action  string     `json:"action"`
	Filters filtersOut `json:"filters"`
	Count   int        `json:"count"`
	Rows    []employee `json:"rows,omitempty"`
}

// filtersOut echoes the filters a query applied.
type filtersOut struct {
	Department string   `json:"department,omitempty"`
	Role       string   `json:"role,omitempty"`
	MinSalary  *float64 `json:"min_salary,omitempty"`
	MaxSalary  *float64 `json:"max_salary,omitempty"`
	Where      string   `json:"where,omitempty"`
}

// databaseActions are database_query's actions.
var databaseActions = []string{"list", "count", "filter"}

// databaseQuery lists, counts or filters the sample employee table. The
// filters combine with AND: department (exact, case-insensitive), role (a
// word or words of the title, case-insensitive, plurals folded: "engineers"
// matches "Senior Engineer" but not "Engineering Manager"), min_salary,
// max_salary, and where: a salary threshold in words ("salary over 150k",
// "earning less than 120000"), as an orchestrator's keyword planner passes
// the text after "with", "where" or "whose". list and filter return the
// rows; filter needs at least one filter.
func databaseQuery(_ config, args []byte) (any, error) {
	var in databaseIn
	if err := decodeArgs(args, &in); err != nil {
		return nil, err
	}
	if err := in.seedAliases(); err != nil {
		return nil, err
	}
	action := strings.ToLower(strings.TrimSpace(in.Action))
	switch {
	case action == "":
		return nil, fmt.Errorf(`missing "action" (one of %s)`, strings.Join(databaseActions, ", "))
	case !slices.Contains(databaseActions, action):
		return nil, fmt.Errorf("unknown action %q (one of %s)", in.Action, strings.Join(databaseActions, ", "))
	}
	dept := strings.TrimSpace(in.Department)
	if dept != "" {
		known := departments()
		i := slices.IndexFunc(known, func(d string) bool { return strings.EqualFold(d, dept) })
		if i < 0 {
			return nil, fmt.Errorf("unknown department %q (known: %s)", in.Department, strings.Join(known, ", "))
		}
		dept = known[i]
	}
	role := roleWords(in.Role)
	if strings.TrimSpace(in.Role) != "" && len(role) == 0 {
		return nil, fmt.Errorf("role %q has no words", in.Role)
	}
	lo, hi := math.Inf(-1), math.Inf(1)
	for name, v := range map[string]*float64{"min_salary": in.MinSalary, "max_salary": in.MaxSalary} {
		if v != nil && *v < 0 {
			return nil, fmt.Errorf("%s %g is negative", name, *v)
		}
	}
	if in.MinSalary != nil {
		lo = *in.MinSalary
	}
	if in.MaxSalary != nil {
		hi = *in.MaxSalary
	}
	where := strings.TrimSpace(in.Where)
	if where != "" {
		isMin, v, err := parseWhere(where)
		if err != nil {
			return nil, err
		}
		if isMin {
			lo = math.Max(lo, v)
		} else {
			hi = math.Min(hi, v)
		}
	}
	if action == "filter" && dept == "" && len(role) == 0 && in.MinSalary == nil && in.MaxSalary == nil && where == "" {
		return nil, errors.New(`filter needs at least one of "department", "role", "min_salary", "max_salary", "where" (or use list)`)
	}
	out := databaseOut{Action: action, Filters: filtersOut{Department: dept, Role: strings.TrimSpace(in.Role),
		MinSalary: in.MinSalary, MaxSalary: in.MaxSalary, Where: where}}
	rows := []employee{}
	for _, e := range sampleEmployees {
		if dept != "" && e.Department != dept {
			continue
		}
		if len(role) > 0 && !containsWords(roleWords(e.Title), role) {
			continue
		}
		if pay := float64(e.Salary); pay < lo || pay > hi {
			continue
		}
		rows = append(rows, e)
	}
	out.Count = len(rows)
	if action != "count" {
		out.Rows = rows
	}
	return out, nil
}

var (
	// whereNumber is the amount of a where clause: 150000, 150,000, 150k, $150k.
	whereNumber = regexp.MustCompile(`\$?(\d+(?:,\d{3})*(?:\.\d+)?)\s*(k|thousand)?\b`)
	// whereBelow marks an upper bound; anything else with an amount is a
	// lower one ("over", "above", "at least", "earning 150k").
	whereBelow = regexp.MustCompile(`(?i)(\b(below|under|less|fewer|at\s+most|up\s+to|lower|max(imum)?)\b|<)`)
)

// parseWhere reads a salary threshold in words: whether it is a lower
// bound, and the amount. It refuses any other condition.
func parseWhere(w string) (isMin bool, v float64, err error) {
	if len(w) > 200 {
		return false, 0, errors.New("where is longer than 200 bytes")
	}
	m := whereNumber.FindStringSubmatch(strings.ToLower(w))
	if m == nil {
		return false, 0, fmt.Errorf(`where %q: only a salary threshold is understood, such as "salary over 150000" or "earning less than 120k"; use department and role for the rest`, w)
	}
	v, err = strconv.ParseFloat(strings.ReplaceAll(m[1], ",", ""), 64)
	if err != nil {
		return false, 0, fmt.Errorf("where %q: %q is not a number", w, m[1])
	}
	if m[2] != "" {
		v *= 1000
	}
	return !whereBelow.MatchString(w), v, nil
}

// departments lists the sample's departments in table order.
func departments() []string {
	var ds []string
	for _, e := range sampleEmployees {
		if !slices.Contains(ds, e.Department) {
			ds = append(ds, e.Department)
		}
	}
	return ds
}

// roleWords splits a title or role into lower-case words with a plural
// "s" folded ("Engineers" → "engineer").
func roleWords(s string) []string {
	ws := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for i, w := range ws {
		ws[i] = foldPlural(w)
	}
	return ws
}

// foldPlural drops a plural "s" from a word of four letters or more
// ("engineers", but not "ss" endings such as "boss").
func foldPlural(w string) string {
	if len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") {
		return w[:len(w)-1]
	}
	return w
}

// containsWords says whether sub occurs in ws as consecutive words.
func containsWords(ws, sub []string) bool {
	for i := 0; i+len(sub) <= len(ws); i++ {
		if slices.Equal(ws[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// filterFields are the fields the seed's filter_field may name, each a
// filter of database_query ("title" is the seed's name of role).
var filterFields = []string{"department", "role", "title", "min_salary", "max_salary", "where"}

// seedAliases folds the seed's names into today's: query_type into action,
// filter_field and filter_value into the filter they name. A name given
// both ways must agree.
func (in *databaseIn) seedAliases() error {
	if qt := strings.TrimSpace(in.QueryType); qt != "" {
		if a := strings.TrimSpace(in.Action); a != "" && !strings.EqualFold(a, qt) {
			return fmt.Errorf(`"action" %q and "query_type" %q disagree (query_type is the seed's name of action): give one`, in.Action, in.QueryType)
		}
		in.Action = qt
	}
	field := strings.ToLower(strings.TrimSpace(in.FilterField))
	hasValue := len(in.FilterValue) > 0 && string(in.FilterValue) != "null"
	switch {
	case field == "" && !hasValue:
		return nil
	case field == "":
		return errors.New(`"filter_value" without "filter_field" (one of ` + strings.Join(filterFields, ", ") + `)`)
	case !hasValue:
		return fmt.Errorf(`"filter_field" %q without "filter_value"`, in.FilterField)
	case !slices.Contains(filterFields, field):
		return fmt.Errorf(`unknown filter_field %q (one of %s)`, in.FilterField, strings.Join(filterFields, ", "))
	}
	switch field {
	case "min_salary", "max_salary":
		var v float64
		if err := json.Unmarshal(in.FilterValue, &v); err != nil {
			var s string
			if json.Unmarshal(in.FilterValue, &s) != nil {
				return fmt.Errorf(`filter_value of %s: want a number`, field)
			}
			if v, err = strconv.ParseFloat(strings.TrimSpace(s), 64); err != nil {
				return fmt.Errorf(`filter_value of %s: %q is not a number`, field, s)
			}
		}
		dst := &in.MinSalary
		if field == "max_salary" {
			dst = &in.MaxSalary
		}
		if *dst != nil && **dst != v {
			return fmt.Errorf(`%q %g and filter_value %g of filter_field %q disagree: give one`, field, **dst, v, field)
		}
		*dst = &v
		return nil
	}
	var s string
	if err := json.Unmarshal(in.FilterValue, &s); err != nil {
		return fmt.Errorf(`filter_value of %s: want a string`, field)
	}
	dst := &in.Department
	switch field {
	case "role", "title":
		dst, field = &in.Role, "role"
	case "where":
		dst = &in.Where
	}
	if cur := strings.TrimSpace(*dst); cur != "" && !strings.EqualFold(cur, strings.TrimSpace(s)) {
		return fmt.Errorf(`%q %q and filter_value %q of filter_field %q disagree: give one`, field, *dst, s, in.FilterField)
	}
	*dst = s
	return nil
}

// webSearchIn are web_search's arguments.
type webSearchIn struct {
	Query      string `json:"query"`
	Limit      *int   `json:"limit"`
	NumResults *int   `json:"num_results"` // the seed's name of limit
}

// webSearchOut is web_search's result.
type webSearchOut struct {
	Query   string         `json:"query"`
	Results []searchResult `json:"results"`
	Source  string         `json:"source"`
}

// searchResult is one ranked document.
type searchResult struct {
	document
	Score int `json:"score"`
}

// Bounds of web_search's limit.
const (
	defaultSearchLimit = 5
	maxSearchLimit     = 10
	maxQueryLen        = 1000
)

// stopWords are left out of the overlap score.
var stopWords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true,
	"by": true, "do": true, "does": true, "for": true, "from": true, "how": true, "i": true,
	"in": true, "is": true, "it": true, "of": true, "on": true, "or": true, "the": true,
	"to": true, "what": true, "when": true, "where": true, "which": true, "who": true,
	"why": true, "with": true,
}

// webSearch ranks the canned documents by how many of the query's words
// (stop words aside) they hold, a title word counting twice; documents
// that hold none are left out.
func webSearch(_ config, args []byte) (any, error) {
	var in webSearchIn
	if err := decodeArgs(args, &in); err != nil {
		return nil, err
	}
	if len(in.Query) > maxQueryLen {
		return nil, fmt.Errorf("query longer than %d bytes", maxQueryLen)
	}
	if in.NumResults != nil {
		if in.Limit != nil && *in.Limit != *in.NumResults {
			return nil, fmt.Errorf(`"limit" %d and "num_results" %d disagree (num_results is the seed's name of limit): give one`, *in.Limit, *in.NumResults)
		}
		in.Limit = in.NumResults
	}
	limit := defaultSearchLimit
	if in.Limit != nil {
		limit = *in.Limit
		if limit < 1 || limit > maxSearchLimit {
			return nil, fmt.Errorf("limit %d is out of range [1, %d]", limit, maxSearchLimit)
		}
	}
	var q []string
	for _, w := range roleWords(in.Query) {
		if !stopWords[w] && !slices.Contains(q, w) {
			q = append(q, w)
		}
	}
	if len(q) == 0 {
		return nil, fmt.Errorf(`query %q has no words to search for`, in.Query)
	}
	res := []searchResult{}
	for _, d := range sampleDocuments {
		title, body := roleWords(d.Title), roleWords(d.Snippet)
		score := 0
		for _, w := range q {
			if slices.Contains(title, w) {
				score += 2
			} else if slices.Contains(body, w) {
				score++
			}
		}
		if score > 0 {
			res = append(res, searchResult{document: d, Score: score})
		}
	}
	slices.SortStableFunc(res, func(a, b searchResult) int { return b.Score - a.Score })
	if len(res) > limit {
		res = res[:limit]
	}
	return webSearchOut{Query: in.Query, Results: res, Source: "offline sample documents"}, nil
}

// fileReaderIn are file_reader's arguments.
type fileReaderIn struct {
	Path     string `json:"path"`
	MaxLines *int   `json:"max_lines"`
}

// fileReaderOut is file_reader's result.
type fileReaderOut struct {
	Path      string   `json:"path"`
	Lines     []string `json:"lines"`
	Truncated bool     `json:"truncated"`
}

// Bounds of file_reader.
const (
	defaultMaxLines = 100
	maxMaxLines     = 1000
	maxLineLen      = 64 << 10
	maxPathLen      = 1024
)

// fileReader reads the first lines of a text file inside the sandbox
// directory. The path is relative to it; absolute paths, ".." and NUL are
// refused, and os.Root refuses symbolic links that lead out of it.
func fileReader(cfg config, args []byte) (any, error) {
	var in fileReaderIn
	if err := decodeArgs(args, &in); err != nil {
		return nil, err
	}
	maxLines := defaultMaxLines
	if in.MaxLines != nil {
		maxLines = *in.MaxLines
		if maxLines < 1 || maxLines > maxMaxLines {
			return nil, fmt.Errorf("max_lines %d is out of range [1, %d]", maxLines, maxMaxLines)
		}
	}
	p, err := sandboxPath(in.Path)
	if err != nil {
		return nil, err
	}
	if cfg.root == "" {
		return nil, fmt.Errorf("no directory to read in: set %s or give --root", envFiles)
	}
	root, err := os.OpenRoot(cfg.root)
	if err != nil {
		return nil, fmt.Errorf("the files directory cannot be opened: %w", err)
	}
	defer root.Close()
	f, err := root.Open(p)
	if err != nil {
		return nil, fmt.Errorf("path %q: %s", in.Path, openReason(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("path %q: %w", in.Path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("path %q is not a regular file", in.Path)
	}
	out := fileReaderOut{Path: p, Lines: []string{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), maxLineLen)
	for sc.Scan() {
		if len(out.Lines) == maxLines {
			out.Truncated = true
			break
		}
		out.Lines = append(out.Lines, strings.ToValidUTF8(strings.TrimSuffix(sc.Text(), "\r"), "\uFFFD"))
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("path %q: line %d is longer than %d bytes", in.Path, len(out.Lines)+1, maxLineLen)
		}
		return nil, fmt.Errorf("path %q: %w", in.Path, err)
	}
	return out, nil
}

// sandboxPath checks a file_reader path and returns it cleaned: relative,
// no ".." element, no NUL, not empty.
func sandboxPath(p string) (string, error) {
	switch {
	case strings.TrimSpace(p) == "":
		return "", errors.New(`missing "path" (relative to the files directory)`)
	case len(p) > maxPathLen:
		return "", fmt.Errorf("path longer than %d bytes", maxPathLen)
	case strings.IndexByte(p, 0) >= 0:
		return "", errors.New("path contains a NUL byte")
	case filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`):
		return "", fmt.Errorf("path %q is absolute; give a path relative to the files directory", p)
	}
	for _, el := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		if el == ".." {
			return "", fmt.Errorf(`path %q contains ".."; give a path inside the files directory`, p)
		}
	}
	return filepath.Clean(p), nil
}

// openReason says why os.Root could not open a path, without the host's
// directory names.
func openReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "no such file"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	case strings.Contains(err.Error(), "escapes"): // os.Root's "path escapes from parent"
		return "leads out of the files directory (a symbolic link?)"
	}
	return err.Error()
}
