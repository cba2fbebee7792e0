package orchestrate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/mcpv2/mcpv2/internal/lazyre"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Skills and tags the heuristic plans for.
const (
	skillCalculator = "calculator"
	skillWeather    = "weather"
	skillSearch     = "web_search"
	skillDatabase   = "database_query"
	skillFile       = "file_reader"
	skillAsk        = "ask"
)

// HeuristicPlanner plans with Heuristic. The zero value is ready to use and
// safe for concurrent use.
type HeuristicPlanner struct{}

// Plan returns Heuristic(request). It fails only for a request Run would
// refuse (empty, longer than MaxRequestBytes, not UTF-8) or one that holds
// no clause.
func (HeuristicPlanner) Plan(ctx context.Context, request string) (Plan, error) {
	if err := checkRequest(request); err != nil {
		return Plan{}, err
	}
	p := Heuristic(request)
	if len(p.Subtasks) == 0 {
		return Plan{}, fmt.Errorf("%w: no clause found in %q", ErrInvalidRequest, truncate(request, 80))
	}
	return p, nil
}

// Heuristic splits request into clauses and maps each clause by keywords to
// one skill. It is the seed's keyword decomposition, extended; its plans
// need no language model and always validate (an empty request gives a plan
// without subtasks).
//
// Clauses end at ";", "?", "!", a new line, and a "." followed by a space or
// the end. Within a clause, ",", " and ", " then ", ", and then " (and the
// like) also end a clause, but only when the words after them start a new
// request ("what", "how", "search", "compute", "summarize", …) or map to
// another skill of the table below than the words before (newSkill), so
// that "add 5 and 3" and "engineers and designers" stay whole. Leading "and", "then",
// "also", "please" are dropped. At most MaxSubtasks clauses are planned;
// the rest join the last one.
//
// Each clause gets the first skill of this table whose condition holds:
//
//	skill           condition                                  arguments                                 tags
//	calculator      an arithmetic phrase with numbers:         {"operation","a","b"}: operation is one    math
//	                "7 times 6", "7 * 6", "7 plus 6",          of add, subtract, multiply, divide,
//	                "subtract 3 from 10", "10 divided by 2",   power, sqrt (no "b"), modulo; a and b are
//	                "2 to the power of 8", "5 squared",        JSON numbers as written ("subtract 3 from
//	                "square root of 81", "17 mod 5", "sum of   10" is a=10, b=3); the words zero to
//	                2 and 3", "product of 4 and 5"             twenty and the tens count as numbers
//	weather         weather, temperature, forecast, rain, …    {"city"}: the words after in/for/at, less  weather
//	                and a place after in/for/at                "today", "tomorrow", "now", …
//	database_query  "how many X are/work in D", or database,   {"action": "count" (how many, count,       database
//	                employee(s), staff, headcount,             number of, headcount) | "list" | "filter"
//	                department, team, salary, payroll          (with, where, whose, earning, salary,
//	                                                           over, above, below, more/less than)},
//	                                                           "department": D when named (in/from/of D,
//	                                                           "D team", "D department"), "role": X
//	                                                           singular ("engineer") unless X is a
//	                                                           generic word (employees, people, staff),
//	                                                           "where": the text after with/where/whose
//	file_reader     file, read, open, contents, cat, and a     {"path"}                                  files
//	                path ("notes.txt", "/etc/hosts", quoted)
//	web_search      search, look up, find information,         {"query"}: the words after the keyword    search
//	                research, google, news about               ("for", "about" dropped), else the clause
//	ask             analyze, analyse, sentiment, summarize,    {"query": clause}; when the clause refers  llm
//	                summary, compare, explain, conclude        back ("the results", "them", "all", …) or
//	                                                           is the bare verb ("summarize"), it depends
//	                                                           on every earlier subtask and its query
//	                                                           carries their results as templates
//	ask             anything else                              {"query": clause}                          llm
//
// A clause that asks to calculate or compute without a parsable expression
// goes to ask with the tags llm and math. The ask skill's argument is
// "query", as the node's standard ask skill takes it. Subtask ids are the
// skill names, suffixed "-2", "-3", … when a skill repeats. Text in the
// arguments that holds "{{" is escaped so that it stays literal.
func Heuristic(request string) Plan {
	request = truncate(strings.ToValidUTF8(request, "\uFFFD"), MaxRequestBytes)
	clauses := splitClauses(request)
	if len(clauses) > MaxSubtasks {
		rest := truncate(strings.Join(clauses[MaxSubtasks-1:], "; "), MaxRequestBytes)
		clauses = append(clauses[:MaxSubtasks-1], rest)
	}
	p := Plan{Source: SourceHeuristic, Subtasks: make([]Subtask, 0, len(clauses))}
	used := map[string]int{}
	for _, c := range clauses {
		st := classify(c)
		used[st.Skill]++
		st.ID = st.Skill
		if n := used[st.Skill]; n > 1 {
			st.ID = st.Skill + "-" + strconv.Itoa(n)
		}
		if st.Skill == skillAsk && len(p.Subtasks) > 0 && refersBack(c) {
			st = withDependencies(st, p.Subtasks)
		}
		p.Subtasks = append(p.Subtasks, st)
	}
	return p
}

var (
	// hardSplit ends a clause always.
	hardSplit = lazyre.New(`[;?!\n\r]+|\.(?:\s+|$)`)
	// softSplit ends a clause when a new request starts after it.
	softSplit = lazyre.New(`(?i)\s*,\s*(?:and\s+then\s+|and\s+also\s+|and\s+|then\s+|also\s+)?|\s+and\s+then\s+|\s+and\s+also\s+|\s+then\s+|\s+and\s+`)
	// leadingConnector is dropped from the start of a clause.
	leadingConnector = lazyre.New(`(?i)^(?:(?:and|then|also|please|finally|first|firstly|second|secondly|next|lastly|so)\b[\s,]*)+`)
)

// starters begin a new request after a soft separator.
var starters = toSet(`what what's whats how who whom when where which why is are was were does do did can could would will
please tell give show find search look lookup research compute calculate calc get fetch list count read open
summarize summarise summary analyze analyse check translate write explain describe compare add subtract multiply divide
evaluate solve convert query ask name estimate then also and google`)

func toSet(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// splitClauses splits a request into trimmed, non-empty clauses.
func splitClauses(request string) []string {
	var out []string
	for _, hard := range hardSplit().Split(request, -1) {
		start := 0
		matches := softSplit().FindAllStringIndex(hard, -1)
		for i, m := range matches {
			if m[0] < start {
				continue
			}
			next := len(hard)
			if i+1 < len(matches) {
				next = matches[i+1][0]
			}
			if starters[strings.ToLower(firstWord(hard[m[1]:]))] || newSkill(hard[start:m[0]], hard[m[1]:next]) {
				out = appendClause(out, hard[start:m[0]])
				start = m[1]
			}
		}
		out = appendClause(out, hard[start:])
	}
	return out
}

// newSkill reports whether the words after a soft separator (after, up to
// the next one) are a request of their own: both sides map to a skill of
// the table other than ask, and not the same one. So "what is 7 times 6,
// and the weather in Tokyo" is two clauses though "the" starts no request,
// while "add 5 and 3" and "the weather in Paris and London" stay whole.
func newSkill(before, after string) bool {
	a, b := classify(strings.TrimSpace(before)).Skill, classify(strings.TrimSpace(after)).Skill
	return a != skillAsk && b != skillAsk && a != b
}

// appendClause appends c, cleaned, when something is left of it.
func appendClause(out []string, c string) []string {
	c = strings.TrimSpace(c)
	c = strings.TrimSpace(leadingConnector().ReplaceAllString(c, ""))
	c = strings.TrimRight(c, " ,.:;")
	if strings.IndexFunc(c, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) < 0 {
		return out
	}
	return append(out, c)
}

// firstWord returns the first run of letters and apostrophes of s.
func firstWord(s string) string {
	s = strings.TrimLeftFunc(s, unicode.IsSpace)
	end := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && r != '\'' })
	if end < 0 {
		return s
	}
	return s[:end]
}

// classify maps one clause to a subtask (without its id).
func classify(c string) Subtask {
	if st, ok := calculator(c); ok {
		return st
	}
	if st, ok := weather(c); ok {
		return st
	}
	if st, ok := database(c); ok {
		return st
	}
	if st, ok := fileReader(c); ok {
		return st
	}
	if st, ok := search(c); ok {
		return st
	}
	tags := []string{"llm"}
	if mathWords().MatchString(c) {
		tags = append(tags, "math")
	}
	return subtask(c, skillAsk, map[string]any{"query": literal(c)}, tags...)
}

// subtask builds a subtask for clause c.
func subtask(c, skill string, args map[string]any, tags ...string) Subtask {
	return Subtask{Text: c, Skill: skill, Tags: tags, Arguments: marshalArgs(args)}
}

// marshalArgs encodes heuristic arguments (strings and json.Numbers only)
// without HTML escaping.
func marshalArgs(args map[string]any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(args); err != nil {
		return json.RawMessage("{}")
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// maxLiteralJSON caps the encoded size of one argument value the heuristic
// writes, so that a subtask's arguments stay under MaxArgumentsBytes
// whatever the request holds (escapes can make JSON 6 times its text).
const maxLiteralJSON = MaxArgumentsBytes / 2

// literal escapes "{{" so that text stays literal through the templates,
// and shortens s until its JSON form fits in maxLiteralJSON bytes.
func literal(s string) string {
	for {
		l := strings.ReplaceAll(s, "{{", `{{"{{"}}`)
		if b, err := json.Marshal(l); err == nil && len(b) <= maxLiteralJSON {
			return l
		}
		s = truncate(s, len(s)/2)
	}
}

// ---- calculator ----

const num = `(-?\d+(?:\.\d+)?)`

// calcRule is one arithmetic phrase: the operation, the pattern, and which
// submatches are a and b (0: absent; for squared/cubed b is fixed).
type calcRule struct {
	op     string
	re     func() *regexp.Regexp // lazyre.New
	a, b   int
	fixedB string
}

var calcRules = []calcRule{
	{op: "sqrt", re: lazyre.New(`(?i)\b(?:square\s+root\s+of|sqrt\s+of|sqrt)\s*\(?\s*` + num), a: 1},
	{op: "modulo", re: lazyre.New(`(?i)\bremainder\s+(?:of|when)\s+` + num + `\s+(?:is\s+)?(?:divided\s+by|by|/)\s*` + num), a: 1, b: 2},
	{op: "modulo", re: lazyre.New(`(?i)` + num + `\s*(?:\bmodulo\b|\bmod\b|%)\s*` + num), a: 1, b: 2},
	{op: "power", re: lazyre.New(`(?i)` + num + `\s*(?:to\s+the\s+power\s+of|to\s+the\s+power|raised\s+to(?:\s+the\s+power\s+of)?|\^|\*\*)\s*` + num), a: 1, b: 2},
	{op: "power", re: lazyre.New(`(?i)\b(?:power\s+of)\s+` + num + `\s+(?:and|to|by)\s+` + num), a: 1, b: 2},
	{op: "power", re: lazyre.New(`(?i)` + num + `\s+squared\b`), a: 1, fixedB: "2"},
	{op: "power", re: lazyre.New(`(?i)` + num + `\s+cubed\b`), a: 1, fixedB: "3"},
	{op: "multiply", re: lazyre.New(`(?i)` + num + `\s*(?:\btimes\b|\bmultiplied\s+by\b|\*|×)\s*` + num), a: 1, b: 2},
	{op: "multiply", re: lazyre.New(`(?i)` + num + `\s+x\s+` + num), a: 1, b: 2},
	{op: "multiply", re: lazyre.New(`(?i)\bmultiply\s+` + num + `\s+(?:by|and|with|times)\s+` + num), a: 1, b: 2},
	{op: "multiply", re: lazyre.New(`(?i)\bproduct\s+of\s+` + num + `\s+and\s+` + num), a: 1, b: 2},
	{op: "divide", re: lazyre.New(`(?i)` + num + `\s*(?:\bdivided\s+by\b|\bover\b|/|÷)\s*` + num), a: 1, b: 2},
	{op: "divide", re: lazyre.New(`(?i)\bdivide\s+` + num + `\s+(?:by|into)\s+` + num), a: 1, b: 2},
	{op: "divide", re: lazyre.New(`(?i)\bquotient\s+of\s+` + num + `\s+and\s+` + num), a: 1, b: 2},
	{op: "add", re: lazyre.New(`(?i)` + num + `\s*(?:\bplus\b|\+|\badded\s+to\b)\s*` + num), a: 1, b: 2},
	{op: "add", re: lazyre.New(`(?i)\badd\s+` + num + `\s+(?:and|to|plus|with)\s+` + num), a: 1, b: 2},
	{op: "add", re: lazyre.New(`(?i)\bsum\s+of\s+` + num + `\s+and\s+` + num), a: 1, b: 2},
	{op: "subtract", re: lazyre.New(`(?i)\bsubtract\s+` + num + `\s+from\s+` + num), a: 2, b: 1},
	{op: "subtract", re: lazyre.New(`(?i)\bdifference\s+(?:between|of)\s+` + num + `\s+and\s+` + num), a: 1, b: 2},
	{op: "subtract", re: lazyre.New(`(?i)` + num + `\s*(?:\bminus\b|\bless\b|-)\s*` + num), a: 1, b: 2},
}

var (
	// numberWords are replaced by digits before the calculator rules run.
	numberWords = lazyre.New(`(?i)\b(zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand)\b`)
	wordValue   = map[string]string{
		"zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
		"eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "thirteen": "13",
		"fourteen": "14", "fifteen": "15", "sixteen": "16", "seventeen": "17", "eighteen": "18",
		"nineteen": "19", "twenty": "20", "thirty": "30", "forty": "40", "fifty": "50", "sixty": "60",
		"seventy": "70", "eighty": "80", "ninety": "90", "hundred": "100", "thousand": "1000",
	}
	mathWords = lazyre.New(`(?i)\b(calculate|compute|evaluate|solve|math|arithmetic)\b`)
)

// calculator recognizes an arithmetic clause.
func calculator(c string) (Subtask, bool) {
	s := numberWords().ReplaceAllStringFunc(c, func(w string) string { return wordValue[strings.ToLower(w)] })
	for _, r := range calcRules {
		m := r.re().FindStringSubmatch(s)
		if m == nil {
			continue
		}
		a, ok := number(m[r.a])
		if !ok {
			continue
		}
		args := map[string]any{"operation": r.op, "a": a}
		switch {
		case r.fixedB != "":
			args["b"] = json.Number(r.fixedB)
		case r.b > 0:
			b, ok := number(m[r.b])
			if !ok {
				continue
			}
			args["b"] = b
		}
		return subtask(c, skillCalculator, args, "math"), true
	}
	return Subtask{}, false
}

// number returns s as a JSON number when it is a finite one.
func number(s string) (json.Number, bool) {
	if len(s) > 64 {
		return "", false
	}
	if _, err := strconv.ParseFloat(s, 64); err != nil {
		return "", false
	}
	// JSON forbids leading zeros ("007"); drop them.
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	intPart, frac, hasFrac := strings.Cut(s, ".")
	intPart = strings.TrimLeft(intPart, "0")
	if intPart == "" {
		intPart = "0"
	}
	s = intPart
	if hasFrac {
		s += "." + frac
	}
	if neg && strings.Trim(s, "0.") != "" {
		s = "-" + s
	}
	return json.Number(s), json.Valid([]byte(s))
}

// ---- weather ----

var (
	weatherWords = lazyre.New(`(?i)\b(weather|temperature|forecast|rain|raining|snow|snowing|sunny|humidity|humid|windy|wind)\b`)
	placeAfter   = lazyre.New(`(?i)\b(?:in|for|at)\s+(.+)$`)
	placeTail    = lazyre.New(`(?i)\s*\b(?:today|tomorrow|tonight|now|right now|currently|this\s+(?:morning|afternoon|evening|week|weekend)|next\s+\w+|please|in\s+(?:celsius|fahrenheit|kelvin)|like)\b.*$`)
	placeHead    = lazyre.New(`(?i)^(?:the\s+city\s+of\s+|the\s+)`)
)

// weather recognizes a weather clause that names a place.
func weather(c string) (Subtask, bool) {
	loc := weatherWords().FindStringIndex(c)
	if loc == nil {
		return Subtask{}, false
	}
	// The place follows the keyword ("weather in Tokyo"); failing that, it
	// may precede it ("Tokyo weather" is not parsed: it asks instead).
	m := placeAfter().FindStringSubmatch(c[loc[1]:])
	if m == nil {
		return Subtask{}, false
	}
	city := placeTail().ReplaceAllString(m[1], "")
	city = placeHead().ReplaceAllString(city, "")
	city = strings.Trim(city, " \t,.;:!?\"'")
	if city == "" || utf8.RuneCountInString(city) > 100 {
		return Subtask{}, false
	}
	return subtask(c, skillWeather, map[string]any{"city": literal(city)}, "weather"), true
}

// ---- database ----

var (
	howMany      = lazyre.New(`(?i)\bhow\s+many\s+([a-z][a-z-]*(?:\s+[a-z][a-z-]*)?)\s+(?:are\s+there\s+|are\s+|is\s+|work\s+|works\s+|working\s+|there\s+are\s+)(?:in|on|for|at|within)\s+(.+)$`)
	dbWords      = lazyre.New(`(?i)\b(database|db|employees?|staff|headcount|departments?|dept|payroll|salary|salaries|personnel|team\s+members?)\b`)
	countWords   = lazyre.New(`(?i)\b(how\s+many|count|number\s+of|headcount|total\s+of)\b`)
	filterWords  = lazyre.New(`(?i)\b(with|where|whose|earning|earns|salary|salaries|hired|over|above|below|more\s+than|less\s+than|at\s+least)\b`)
	filterClause = lazyre.New(`(?i)\b(?:with|where|whose|who)\s+(.+)$`)
	// Department patterns, tried in order on the original text.
	deptSuffixed = lazyre.New(`(?i)\b(?:in|from|of|for|on|at)\s+(?:the\s+)?([\w&]+(?:[ -][\w&]+)?)\s+(?:team|department|dept|division|group|org)\b`)
	deptPrefixed = lazyre.New(`(?i)\b(?:department|dept|team|division)\s+(?:of\s+|called\s+|named\s+)?([\w&-]+)`)
	deptCapital  = lazyre.New(`\b(?:in|from|for|on|at|of)\s+(?:the\s+)?([A-Z][\w&-]*(?:\s+[A-Z][\w&-]*)*)`)
	listRole     = lazyre.New(`(?i)\b(?:list|show|get|find|name)\s+(?:me\s+)?(?:all\s+)?(?:the\s+)?([a-z][a-z-]*)\b`)
	deptTrail    = lazyre.New(`(?i)\s+(?:team|department|dept|division|group|org)\b.*$`)
)

// genericRoles are nouns that name everybody, not a role.
var genericRoles = toSet(`employees employee people persons person staff members member workers worker everyone everybody users user folks team teams department departments records entries rows`)

// database recognizes a question about the staff database.
func database(c string) (Subtask, bool) {
	hm := howMany().FindStringSubmatch(c)
	if hm == nil && !dbWords().MatchString(c) {
		return Subtask{}, false
	}
	args := map[string]any{}
	var role string
	switch {
	case countWords().MatchString(c):
		args["action"] = "count"
	case filterWords().MatchString(c):
		args["action"] = "filter"
	default:
		args["action"] = "list"
	}
	dept := ""
	if m := deptSuffixed().FindStringSubmatch(c); m != nil {
		dept = m[1]
	} else if m := deptPrefixed().FindStringSubmatch(c); m != nil && !genericRoles[strings.ToLower(m[1])] && !stop[strings.ToLower(m[1])] {
		dept = m[1]
	} else if hm != nil {
		dept = deptTrail().ReplaceAllString(strings.TrimSpace(hm[2]), "")
		dept = strings.TrimPrefix(strings.TrimPrefix(dept, "the "), "The ")
	} else if m := deptCapital().FindStringSubmatch(c); m != nil {
		dept = m[1]
	}
	dept = strings.Trim(dept, " \t,.;:!?\"'")
	if dept != "" && utf8.RuneCountInString(dept) <= 64 {
		args["department"] = literal(dept)
	}
	if hm != nil {
		role = strings.TrimSpace(hm[1])
	} else if m := listRole().FindStringSubmatch(c); m != nil {
		role = m[1]
	}
	if role = singular(strings.ToLower(role)); role != "" && len(role) <= 64 && !genericRoles[role] && !genericRoles[role+"s"] && !dbWords().MatchString(role) {
		args["role"] = literal(role)
	}
	if args["action"] == "filter" {
		if m := filterClause().FindStringSubmatch(c); m != nil {
			args["where"] = literal(strings.TrimSpace(m[1]))
		}
	}
	return subtask(c, skillDatabase, args, "database"), true
}

// singular strips a simple English plural.
func singular(w string) string {
	switch {
	case strings.HasSuffix(w, "people"):
		return w
	case strings.HasSuffix(w, "ies") && len(w) > 4:
		return w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "sses"), strings.HasSuffix(w, "ches"), strings.HasSuffix(w, "shes"):
		return w[:len(w)-2]
	case strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && len(w) > 3:
		return w[:len(w)-1]
	}
	return w
}

// ---- file_reader ----

var (
	fileWords = lazyre.New(`(?i)\b(files?|read|open|contents?|cat|show)\b`)
	filePath  = lazyre.New("\"([^\"]{1,512})\"|'([^']{1,512})'|`([^`]{1,512})`|((?:~|\\.{1,2})?/[\\w.@+-]+(?:/[\\w.@+-]+)*|[\\w@+-]+(?:/[\\w.@+-]+)*\\.[A-Za-z][A-Za-z0-9]{0,7})")
)

// fileReader recognizes a request to read a named file.
func fileReader(c string) (Subtask, bool) {
	if !fileWords().MatchString(c) {
		return Subtask{}, false
	}
	for _, m := range filePath().FindAllStringSubmatch(c, -1) {
		for _, p := range m[1:] {
			if p = strings.TrimSpace(p); p != "" {
				return subtask(c, skillFile, map[string]any{"path": literal(p)}, "files"), true
			}
		}
	}
	return Subtask{}, false
}

// ---- web_search ----

var (
	searchWords = lazyre.New(`(?i)\b(?:search(?:\s+the\s+(?:web|internet))?|look\s+up|lookup|find\s+(?:information|info|out|articles|news)|research|google|news)\b`)
	searchHead  = lazyre.New(`(?i)^(?:\s*(?:for|about|on|up|into|online|the\s+web|the\s+internet|me|some|any|information|info|articles|news)\b)+`)
	searchTail  = lazyre.New(`(?i)\s+(?:online|on\s+the\s+(?:web|internet))$`)
)

// search recognizes a web search.
func search(c string) (Subtask, bool) {
	loc := searchWords().FindStringIndex(c)
	if loc == nil {
		return Subtask{}, false
	}
	q := searchHead().ReplaceAllString(c[loc[1]:], "")
	q = searchTail().ReplaceAllString(q, "")
	q = strings.Trim(q, " \t,.;:!?")
	if q == "" {
		q = c
	}
	return subtask(c, skillSearch, map[string]any{"query": literal(q)}, "search"), true
}

// ---- ask, depending on earlier parts ----

var (
	summaryWords = lazyre.New(`(?i)\b(summari[sz]e|summary|analy[sz]e|analysis|sentiment|compare|conclude|combine|explain|report)\b`)
	backRefs     = lazyre.New(`(?i)\b(results?|them|it|its|their|this|that|these|those|above|findings|everything|all|answers?|outputs?|both|together)\b`)
)

// refersBack reports whether an ask clause works on the earlier parts: a
// summary-like verb with a back reference, or the bare verb.
func refersBack(c string) bool {
	if !summaryWords().MatchString(c) {
		return false
	}
	return backRefs().MatchString(c) || len(strings.Fields(c)) <= 2
}

// withDependencies makes st depend on all of earlier and puts their results
// into its query.
func withDependencies(st Subtask, earlier []Subtask) Subtask {
	var q strings.Builder
	q.WriteString(literal(st.Text))
	q.WriteString("\n\nResults of the earlier parts:")
	for _, e := range earlier {
		st.DependsOn = append(st.DependsOn, e.ID)
		fmt.Fprintf(&q, "\n- %s: {{index . %q \"text\"}}", e.ID, e.ID)
	}
	st.Arguments = marshalArgs(map[string]any{"query": q.String()})
	return st
}
