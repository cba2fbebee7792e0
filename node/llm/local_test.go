package llm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func user(s string) Message      { return Message{Role: RoleUser, Content: s} }
func assistant(s string) Message { return Message{Role: RoleAssistant, Content: s} }

func ask(t *testing.T, b Backend, req Request) Response {
	t.Helper()
	resp, err := b.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Text, LocalPrefix+" ") {
		t.Errorf("answer does not start with %q: %q", LocalPrefix, resp.Text)
	}
	return resp
}

// converse plays the user's lines against b, as the ask skill does: each
// request carries the whole history and the answer is appended to it.
func converse(t *testing.T, b Backend, lines ...string) (history []Message, last Response) {
	t.Helper()
	for _, l := range lines {
		history = append(history, user(l))
		last = ask(t, b, Request{Messages: history})
		history = append(history, assistant(last.Text))
	}
	return history, last
}

var adaLines = []string{
	"My name is Ada and my favourite colour is teal.",
	"I live in Lisbon.",
	"I like chess.",
	"What is my favourite colour?",
}

func TestLocalRecallFourTurns(t *testing.T) {
	b := NewLocal()
	_, resp := converse(t, b, adaLines...)
	want := `[local responder] From turn 1 you said: "My name is Ada and my favourite colour is teal."`
	if !strings.HasPrefix(resp.Text, want) || !strings.Contains(resp.Text, "teal") {
		t.Errorf("answer = %q\nwant prefix %q", resp.Text, want)
	}
	if !strings.Contains(resp.Text, "matched: favourite, colour") {
		t.Errorf("answer does not say what matched: %q", resp.Text)
	}
	if resp.Model != LocalModel {
		t.Errorf("model = %q, want %q", resp.Model, LocalModel)
	}

	// The same with only the user's lines in the history (no answers between).
	var msgs []Message
	for _, l := range adaLines {
		msgs = append(msgs, user(l))
	}
	if got := ask(t, b, Request{Messages: msgs}).Text; !strings.HasPrefix(got, want) {
		t.Errorf("user-only history: answer = %q", got)
	}
}

func TestLocalRecallOtherTurns(t *testing.T) {
	b := NewLocal()
	history, _ := converse(t, b, adaLines[:3]...)
	for _, tc := range []struct{ q, turn, quote string }{
		{"Where do I live?", "turn 2", "I live in Lisbon."},
		{"what's my name", "turn 1", "My name is Ada"},
		{"Which games do I like?", "turn 3", "I like chess."},
		{"Remind me of my favorite color", "turn 1", "teal"},  // American spelling, no question mark
		{"WHAT COLOURS ARE MY FAVOURITES?", "turn 1", "teal"}, // case and plural
	} {
		got := ask(t, b, Request{Messages: append(history[:len(history):len(history)], user(tc.q))}).Text
		if !strings.Contains(got, "From "+tc.turn+" you said") || !strings.Contains(got, tc.quote) {
			t.Errorf("%q → %q; want %s quoting %q", tc.q, got, tc.turn, tc.quote)
		}
	}
}

func TestLocalPrefersLatestAndStatements(t *testing.T) {
	b := NewLocal()
	_, resp := converse(t, b,
		"My favourite colour is teal.",
		"What is my favourite colour?",
		"Actually my favourite colour is now red.",
		"What is my favourite colour?",
	)
	// The later statement wins the tie; earlier questions and our own answers are never quoted.
	if !strings.Contains(resp.Text, `From turn 3 you said: "Actually my favourite colour is now red."`) {
		t.Errorf("answer = %q", resp.Text)
	}
}

func TestLocalAssistantTurn(t *testing.T) {
	// History written by another backend: an assistant message can be the source.
	resp := ask(t, NewLocal(), Request{Messages: []Message{
		user("Suggest a name for my cat."),
		assistant("I suggest the name Biscuit: it suits a ginger cat."),
		user("What name did you suggest?"),
	}})
	if !strings.Contains(resp.Text, `From turn 1 the assistant said: "I suggest the name Biscuit: it suits a ginger cat."`) {
		t.Errorf("answer = %q", resp.Text)
	}
	// Asked about the user's own words, the user's message wins the same tie.
	resp = ask(t, NewLocal(), Request{Messages: []Message{
		user("Suggest a name for my cat."),
		assistant("I suggest the name Biscuit: it suits a ginger cat."),
		user("What did I ask you to suggest a name for?"),
	}})
	if !strings.Contains(resp.Text, `From turn 1 you said: "Suggest a name for my cat."`) {
		t.Errorf("answer = %q", resp.Text)
	}
}

func TestLocalNoMatch(t *testing.T) {
	history, _ := converse(t, NewLocal(), adaLines[:3]...)
	got := ask(t, NewLocal(), Request{Messages: append(history, user("What is the weather tomorrow?"))}).Text
	if !strings.Contains(got, "Nothing said in the 3 turns before this one matches your question.") ||
		!strings.Contains(got, `Turn 4: you said "What is the weather tomorrow?"`) {
		t.Errorf("answer = %q", got)
	}
}

func TestLocalStatementIsNotRecall(t *testing.T) {
	history, _ := converse(t, NewLocal(), "I like chess.")
	got := ask(t, NewLocal(), Request{Messages: append(history, user("I like chess a lot."))}).Text
	if strings.Contains(got, "From turn") || !strings.Contains(got, `Turn 2: you said "I like chess a lot."`) {
		t.Errorf("answer = %q", got)
	}
}

func TestLocalNoHistory(t *testing.T) {
	b := NewLocal()
	resp := ask(t, b, Request{System: "Be kind and brief.", Messages: []Message{user("Hello, how are you today?")}})
	want := `[local responder] You said "Hello, how are you today?" (5 words, 25 characters; key words: hello, today). A system prompt of 4 words was given. This is a deterministic local responder, not a language model`
	if !strings.HasPrefix(resp.Text, want) {
		t.Errorf("answer = %q\nwant prefix %q", resp.Text, want)
	}
	if resp.Model != "local-echo-1" {
		t.Errorf("model = %q", resp.Model)
	}
	lower := strings.ToLower(resp.Text)
	for _, claim := range []string{"i am a language model", "as an ai", "gpt", "claude", "gemini model"} {
		if strings.Contains(lower, claim) {
			t.Errorf("answer claims to be a model (%q): %q", claim, resp.Text)
		}
	}
	// One word, and the singular is used.
	if got := ask(t, b, Request{Messages: []Message{user("Hi")}}).Text; !strings.Contains(got, `"Hi" (1 word, 2 characters; key words: hi)`) {
		t.Errorf("answer = %q", got)
	}
	// A question with no history is answered directly, not with "nothing matches".
	if got := ask(t, b, Request{Messages: []Message{user("What is Go?")}}).Text; strings.Contains(got, "Nothing said") || !strings.Contains(got, "key words: go") {
		t.Errorf("answer = %q", got)
	}
}

func TestLocalModelOverride(t *testing.T) {
	resp := ask(t, NewLocal(), Request{Model: "custom-7", Messages: []Message{user("x")}})
	if resp.Model != "custom-7" {
		t.Errorf("model = %q", resp.Model)
	}
}

func TestLocalLongInput(t *testing.T) {
	long := strings.Repeat("Filler words here. ", 40) + "The vault code is 4711. " + strings.Repeat("More padding now. ", 40)
	resp := ask(t, NewLocal(), Request{Messages: []Message{user(long), user("What is the vault code?")}})
	if !strings.Contains(resp.Text, `From turn 1 you said: "The vault code is 4711."`) {
		t.Errorf("answer = %q", resp.Text)
	}
	resp = ask(t, NewLocal(), Request{Messages: []Message{user(long)}})
	if n := len([]rune(resp.Text)); n > 1000 || !strings.Contains(resp.Text, "…") {
		t.Errorf("echo of a long message is %d runes: %q", n, resp.Text)
	}
}

func TestLocalDeterministic(t *testing.T) {
	reqs := []Request{
		{Messages: []Message{user("Hello")}},
		{System: "s", Messages: []Message{user("a b c"), assistant("d"), user("what about b?")}},
	}
	history, _ := converse(t, NewLocal(), adaLines...)
	reqs = append(reqs, Request{Messages: history[:len(history)-1]})
	for _, req := range reqs {
		first := ask(t, NewLocal(), req)
		for range 20 {
			if got := ask(t, NewLocal(), req); got != first {
				t.Fatalf("answers differ:\n%+v\n%+v", first, got)
			}
		}
	}
}

func TestLocalConcurrent(t *testing.T) {
	b := NewLocal()
	history, want := converse(t, b, adaLines...)
	req := Request{Messages: history[:len(history)-1]}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			r := req
			if i%2 == 1 {
				r = Request{Messages: []Message{user(fmt.Sprintf("message %d", i))}}
			}
			resp, err := b.Complete(context.Background(), r)
			switch {
			case err != nil:
				errs <- err
			case i%2 == 0 && resp != want:
				errs <- fmt.Errorf("got %q", resp.Text)
			case i%2 == 1 && !strings.Contains(resp.Text, fmt.Sprintf(`"message %d"`, i)):
				errs <- fmt.Errorf("got %q", resp.Text)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestLocalCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewLocal().Complete(ctx, hello); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
}

func TestKeywords(t *testing.T) {
	for in, want := range map[string]string{
		"My name is Ada and my favourite colour is teal.": "name ada favourite colour teal",
		"What's my favorite color?":                       "favourite colour",
		"Cities, boxes, watches, chess, status, games!":   "city box watch chess status game",
		"Ada's cats don't like it":                        "ada cat like",
		"":                                                "",
	} {
		if got := strings.Join(keywords(in), " "); got != want {
			t.Errorf("keywords(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzLocal(f *testing.F) {
	f.Add("My name is Ada.", "What is my name?")
	f.Add("", "?")
	f.Add("'s ’ - _", "tell")
	f.Fuzz(func(t *testing.T, a, q string) {
		req := Request{Messages: []Message{user(a), assistant(a), user(q)}}
		r1, err1 := NewLocal().Complete(context.Background(), req)
		r2, err2 := NewLocal().Complete(context.Background(), req)
		if err1 != nil || err2 != nil || r1 != r2 || !strings.HasPrefix(r1.Text, LocalPrefix) {
			t.Fatalf("%+v %v / %+v %v", r1, err1, r2, err2)
		}
	})
}

func ExampleNewLocal() {
	b := NewLocal()
	resp, _ := b.Complete(context.Background(), Request{Messages: []Message{
		{Role: "user", Content: "My name is Ada and my favourite colour is teal."},
		{Role: "user", Content: "I live in Lisbon."},
		{Role: "user", Content: "I like chess."},
		{Role: "user", Content: "What is my favourite colour?"},
	}})
	fmt.Println(resp.Model)
	fmt.Println(resp.Text)
	// Output:
	// local-echo-1
	// [local responder] From turn 1 you said: "My name is Ada and my favourite colour is teal." (matched: favourite, colour)
}

func TestLocalNeverQuotesItself(t *testing.T) {
	history, _ := converse(t, NewLocal(), "Hi")
	got := ask(t, NewLocal(), Request{Messages: append(history, user("Are you a deterministic language model?"))}).Text
	if strings.Contains(got, "From turn") || !strings.Contains(got, "Nothing said in the 1 turn before this one") {
		t.Errorf("answer = %q", got)
	}
}
