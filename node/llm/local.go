package llm

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// LocalModel is the model name the local backend reports unless the request
// or [New] names another.
const LocalModel = "local-echo-1"

// LocalPrefix starts every answer of the local backend, so that no reader
// mistakes it for a language model.
const LocalPrefix = "[local responder]"

// maxQuoteRunes caps how much of a message the local backend quotes.
const maxQuoteRunes = 300

// NewLocal returns the embedded local backend. It needs no network and no key,
// and it is deterministic: the same request always gets the same answer. Every
// answer starts with [LocalPrefix] and never claims to come from a language
// model.
//
// When the latest user message asks about something (it holds a question mark
// or starts with a question or recall word) and the history holds an earlier
// message that shares content words with it, the answer quotes the best such
// message and names its turn, for example
//
//	[local responder] From turn 1 you said: "My name is Ada and my favourite colour is teal." (matched: favourite, colour)
//
// Words are compared after lower-casing, dropping stop words, folding a few
// American spellings to British ones and stripping simple plurals. Statements
// are preferred to earlier questions, then more shared words, then the user's
// messages to the assistant's (the other way round when the question speaks of
// "you" and not of "I" or "my"), then later turns; the local backend's own
// earlier answers are never quoted. A turn is one user message and the
// answer to it, counted from 1. Otherwise the answer echoes and summarises the
// message (word and character counts, key words). The reported model is
// [LocalModel] unless Request.Model is set; Request.MaxTokens is ignored. It is
// safe for concurrent use.
func NewLocal() Backend { return newLocal("") }

func newLocal(model string) *local {
	model = strings.TrimSpace(model)
	if model == "" {
		model = LocalModel
	}
	return &local{model: model}
}

// local is the deterministic responder. It holds no mutable state.
type local struct {
	model string
}

// Name reports "local".
func (l *local) Name() string { return KindLocal }

// String describes the backend.
func (l *local) String() string { return "llm.local(model=" + l.model + ")" }

// Complete answers req from its own text and history.
func (l *local) Complete(ctx context.Context, req Request) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, fmt.Errorf("llm: local: %w", err)
	}
	if err := validate(req); err != nil {
		return Response{}, err
	}
	model := strings.TrimSpace(req.Model)
	if model == "" {
		model = l.model
	}
	return Response{Text: localAnswer(req), Model: model}, nil
}

// localAnswer builds the deterministic answer to req, which has passed validate.
func localAnswer(req Request) string {
	msgs := req.Messages
	query := msgs[len(msgs)-1].Content
	history := msgs[:len(msgs)-1]

	// turns[i] is the turn of history[i]; a turn begins with a user message.
	turns := make([]int, len(history))
	turn := 0
	for i, m := range history {
		if m.Role == RoleUser || turn == 0 {
			turn++
		}
		turns[i] = turn
	}
	current := turn + 1

	qWords := keywords(query)
	var b strings.Builder
	b.WriteString(LocalPrefix + " ")

	if isQuestion(query) && len(history) > 0 {
		if i, matched := bestMatch(history, qWords, addressesAssistant(query)); i >= 0 {
			m := history[i]
			who := "you said"
			if m.Role == RoleAssistant {
				who = "the assistant said"
			}
			fmt.Fprintf(&b, "From turn %d %s: \"%s\" (matched: %s)", turns[i], who, quote(m.Content, qWords), strings.Join(matched, ", "))
			return b.String()
		}
		fmt.Fprintf(&b, "Nothing said in the %s before this one matches your question. ", plural(turn, "turn"))
	}

	if current > 1 {
		fmt.Fprintf(&b, "Turn %d: you said ", current)
	} else {
		b.WriteString("You said ")
	}
	fmt.Fprintf(&b, "\"%s\" (%s, %s", clip(collapse(query), maxQuoteRunes), plural(len(strings.Fields(query)), "word"), plural(utf8.RuneCountInString(query), "character"))
	if len(qWords) > 0 {
		b.WriteString("; key words: " + strings.Join(clipWords(qWords, 12), ", "))
	}
	b.WriteString(").")
	if s := strings.Fields(req.System); len(s) > 0 {
		fmt.Fprintf(&b, " A system prompt of %s was given.", plural(len(s), "word"))
	}
	b.WriteString(" This is a deterministic local responder, not a language model: it echoes and summarises what it is given and answers questions about earlier turns from this conversation's history. Configure an openai, anthropic or gemini backend for generated answers.")
	return b.String()
}

// bestMatch returns the index of the history message that best answers a
// question with the key words q, and the shared words in q's order; -1 when
// none shares a word. toAssistant prefers the assistant's messages to the
// user's on a tie.
func bestMatch(history []Message, q []string, toAssistant bool) (int, []string) {
	best, bestScore, bestStatement, bestUser := -1, 0, false, false
	var bestWords []string
	for i, m := range history {
		if strings.HasPrefix(strings.TrimSpace(m.Content), LocalPrefix) {
			continue // our own earlier answer: quoting it would only quote a quote
		}
		have := make(map[string]bool)
		for _, w := range keywords(m.Content) {
			have[w] = true
		}
		var shared []string
		for _, w := range q {
			if have[w] {
				shared = append(shared, w)
			}
		}
		if len(shared) == 0 {
			continue
		}
		statement := !isQuestion(m.Content)
		user := (m.Role == RoleUser) != toAssistant
		if better(best < 0, statement, bestStatement, len(shared), bestScore, user, bestUser) {
			best, bestScore, bestStatement, bestUser, bestWords = i, len(shared), statement, user, shared
		}
	}
	return best, bestWords
}

// better orders candidates: statements before questions, then more shared
// words, then the preferred speaker (user says whether the candidate is the
// speaker the question is about). On a full tie it reports true, so that
// scanning forward keeps the latest message.
func better(first, statement, bestStatement bool, score, bestScore int, user, bestUser bool) bool {
	switch {
	case first:
		return true
	case statement != bestStatement:
		return statement
	case score != bestScore:
		return score > bestScore
	case user != bestUser:
		return user
	}
	return true
}

// quote returns the text to quote from content: all of it when short, else
// the sentence that shares most key words with q, clipped.
func quote(content string, q []string) string {
	c := collapse(content)
	if utf8.RuneCountInString(c) <= maxQuoteRunes {
		return c
	}
	want := make(map[string]bool, len(q))
	for _, w := range q {
		want[w] = true
	}
	best, bestN := c, -1
	for _, s := range sentences(c) {
		n := 0
		for _, w := range keywords(s) {
			if want[w] {
				n++
			}
		}
		if n > bestN {
			best, bestN = s, n
		}
	}
	return clip(best, maxQuoteRunes)
}

// sentences splits s after '.', '!' or '?' followed by a space.
func sentences(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if (s[i] == '.' || s[i] == '!' || s[i] == '?') && (i+1 == len(s) || s[i+1] == ' ') {
			if t := strings.TrimSpace(s[start : i+1]); t != "" {
				out = append(out, t)
			}
			start = i + 1
		}
	}
	if t := strings.TrimSpace(s[start:]); t != "" {
		out = append(out, t)
	}
	return out
}

// addressesAssistant reports whether a question is about what the assistant
// said ("What did you suggest?") rather than the user ("What is my name?"):
// it speaks of "you" and not of "I", "me" or "my".
func addressesAssistant(q string) bool {
	you, me := false, false
	for _, f := range strings.FieldsFunc(strings.ToLower(q), notWordRune) {
		switch strings.NewReplacer("'", "", "’", "").Replace(f) {
		case "you", "your", "yours", "yourself", "youve", "youd", "youre", "youll":
			you = true
		case "i", "me", "my", "mine", "myself", "im", "ive", "id", "we", "us", "our":
			me = true
		}
	}
	return you && !me
}

// isQuestion reports whether s asks something: it holds a question mark or
// starts with a question or recall word.
func isQuestion(s string) bool {
	if strings.ContainsAny(s, "?？¿") {
		return true
	}
	for _, f := range strings.FieldsFunc(strings.ToLower(s), notWordRune) {
		return questionStarts[strings.NewReplacer("'", "", "’", "").Replace(f)]
	}
	return false
}

// keywords returns the distinct normalized content words of s, in order.
func keywords(s string) []string {
	var out []string
	seen := make(map[string]bool)
	for _, f := range strings.FieldsFunc(strings.ToLower(s), notWordRune) {
		w := normalize(f)
		if w == "" || seen[w] {
			continue
		}
		seen[w] = true
		out = append(out, w)
	}
	return out
}

// normalize folds one lower-cased word, or returns "" for a stop word.
func normalize(w string) string {
	w = strings.ReplaceAll(w, "’", "'")
	w = strings.TrimSuffix(w, "'s")
	w = strings.Trim(strings.ReplaceAll(w, "'", ""), "-_")
	if w == "" || stopWords[w] {
		return ""
	}
	if v, ok := spellings[w]; ok {
		w = v
	}
	w = singular(w)
	if stopWords[w] {
		return ""
	}
	return w
}

// singular strips a simple English plural ending.
func singular(w string) string {
	n := len(w)
	switch {
	case n <= 3:
		return w
	case strings.HasSuffix(w, "ss"), strings.HasSuffix(w, "us"), strings.HasSuffix(w, "is"):
		return w
	case strings.HasSuffix(w, "ies") && n > 4:
		return w[:n-3] + "y"
	case strings.HasSuffix(w, "sses"), strings.HasSuffix(w, "shes"), strings.HasSuffix(w, "ches"),
		strings.HasSuffix(w, "xes"), strings.HasSuffix(w, "zes"):
		return w[:n-2]
	case strings.HasSuffix(w, "s"):
		if v, ok := spellings[w[:n-1]]; ok {
			return v
		}
		return w[:n-1]
	}
	return w
}

func notWordRune(r rune) bool {
	return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' && r != '’' && r != '-' && r != '_'
}

// collapse turns every run of white space into one space.
func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

// clip shortens s to at most n runes, marking a cut with "…".
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n])) + "…"
}

// clipWords keeps the first n words, marking a cut.
func clipWords(ws []string, n int) []string {
	if len(ws) <= n {
		return ws
	}
	return append(ws[:n:n], "…")
}

// plural formats a count with its noun.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// spellings folds American spellings to British ones, so either matches the other.
var spellings = map[string]string{
	"color": "colour", "favorite": "favourite", "flavor": "flavour", "honor": "honour",
	"neighbor": "neighbour", "center": "centre", "theater": "theatre", "gray": "grey",
}

// questionStarts are first words that make a message a question or a request
// to recall something.
var questionStarts = setOf(`what whats who whos whom whose where wheres when which why how hows
	do does did is are was were can could would will should shall have has had
	tell remind recall remember repeat say`)

// stopWords carry no content of their own.
var stopWords = setOf(`a about above after again against all also am an and any are arent as at
	be because been before being below between both but by can cant could couldnt
	did didnt do does doesnt doing dont down during each earlier either else ever
	few for from further had hadnt has hasnt have havent having he hed hes her here
	hers herself him himself his how i id if im in into is isnt it its itself ive
	just know let lets me mention mentioned more most much my myself no nor not now
	of off oh ok okay on once only or other our ours ourselves out over own please
	previously recall remember remind really said same say she shes should shouldnt
	so some such tell than that thats the their theirs them themselves then there
	theres these they theyre this those through to told too under until up us very
	was wasnt we were what whats when where which while who whom whose why will
	with wont would wouldnt yes you youd youll youre youve your yours yourself
	yourselves`)

func setOf(words string) map[string]bool {
	m := make(map[string]bool)
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}
