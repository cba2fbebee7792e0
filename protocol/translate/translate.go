// Package translate converts chat histories between the native message
// formats of four LLM providers: claude (Anthropic Messages), openai (Chat
// Completions), gemini (generateContent contents) and deepseek (OpenAI
// compatible chat completions with reasoning_content and no image input).
//
// A history is a JSON array of messages in one provider's format. Translate
// decodes it into one internal, provider-neutral representation and encodes
// that into the target format: one decoder and one encoder per provider, never
// a converter per pair. What the target format cannot hold (an image for
// deepseek, is_error for openai, a thinking signature, an unknown field, ...)
// is carried in one explicit side field on the message, "mcpv2", and restored
// when the history is translated back, so that A→B→A returns the original.
// docs/translate.md describes the mapping and the side field's schema.
//
// The side field is not part of any provider's API: a caller that sends a
// translated history to a provider removes it first with Strip.
//
// The package also holds the one definition of each provider's request and
// response bodies (ClaudeRequest, OpenAIResponse, GeminiContent, ...), which
// the llm backends and the HTTP edge use, with ContentText, TextContent and
// SystemText to read and write a message's content and a system prompt.
//
// The package is pure: it does no I/O, keeps no state, and its functions may
// be called concurrently.
package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrUnknownProvider is returned, wrapped, when from or to is not one of
// Providers. Callers map it to the protocol error -32010 (unsupported
// provider); test for it with errors.Is.
var ErrUnknownProvider = errors.New("unknown provider")

// ErrInvalidHistory is returned, wrapped, when a history is malformed or
// breaks a rule of its format. The wrapping message names what was wrong and
// where (message and block indexes count from 0), for example
// `translate: message 3: content block 1: unknown type "foo": invalid history`.
// Callers map it to the protocol error -32602 (invalid params).
var ErrInvalidHistory = errors.New("invalid history")

// Limits on the input, refused with ErrInvalidHistory.
const (
	// MaxMessages is the largest number of messages a history may hold.
	MaxMessages = 10000
	// MaxParts is the largest number of content blocks (parts, tool calls)
	// one message may hold, and the largest number of blocks in one tool
	// result.
	MaxParts = 1000
)

// Provider names.
const (
	provClaude   = "claude"
	provOpenAI   = "openai"
	provGemini   = "gemini"
	provDeepSeek = "deepseek"
)

// sideKey is the name of the side field on a message.
const sideKey = "mcpv2"

// codec decodes a provider's messages into the internal representation and
// encodes the internal representation into the provider's messages.
type codec interface {
	// decode turns the elements of a history array into messages; it
	// validates everything and consumes the side fields.
	decode(items []json.RawMessage) ([]*message, error)
	// encode turns messages into the elements of a history array, writing a
	// side field where the format cannot hold something. The messages come
	// from decode and are valid.
	encode(msgs []*message) ([]json.RawMessage, error)
}

// codecs are the provider codecs by name, in the order Providers lists them.
var codecs = []struct {
	name string
	c    codec
}{
	{provClaude, claudeCodec{}},
	{provOpenAI, openaiCodec{dialect: provOpenAI}},
	{provGemini, geminiCodec{}},
	{provDeepSeek, openaiCodec{dialect: provDeepSeek}},
}

// Providers returns the known provider names: "claude", "openai", "gemini"
// and "deepseek". The caller owns the returned slice.
func Providers() []string {
	out := make([]string, len(codecs))
	for i, c := range codecs {
		out[i] = c.name
	}
	return out
}

func codecFor(which, name string) (codec, error) {
	for _, c := range codecs {
		if c.name == name {
			return c.c, nil
		}
	}
	return nil, fmt.Errorf("translate: %s provider %q (want claude, openai, gemini or deepseek): %w", which, name, ErrUnknownProvider)
}

// Translate converts history, a JSON array of messages in from's native
// format, to to's native format, and returns the array compacted. from and to
// may be equal: the history is then validated and returned in its normal form
// (equal to the input for a history that this package wrote).
//
// An unknown provider name is ErrUnknownProvider; a malformed history is
// ErrInvalidHistory with a message that says what and where. Translating the
// result back to from returns the original history, compared as JSON values.
func Translate(history json.RawMessage, from, to string) (json.RawMessage, error) {
	dec, err := codecFor("source", from)
	if err != nil {
		return nil, err
	}
	enc, err := codecFor("target", to)
	if err != nil {
		return nil, err
	}
	items, err := splitHistory(history)
	if err != nil {
		return nil, err
	}
	msgs, err := dec.decode(items)
	if err != nil {
		return nil, err
	}
	out, err := enc.encode(msgs)
	if err != nil {
		return nil, fmt.Errorf("translate: encode for %s: %w", to, err)
	}
	return arrayOf(out), nil
}

// Strip returns history, a JSON array of messages in any provider's format,
// without the "mcpv2" side field on its messages, ready to send to the
// provider. What the side field carried is lost, so strip a copy and keep the
// translated history for translating back. A history that is not an array of
// objects is ErrInvalidHistory.
func Strip(history json.RawMessage) (json.RawMessage, error) {
	items, err := splitHistory(history)
	if err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, len(items))
	for i, raw := range items {
		where := fmt.Sprintf("message %d", i)
		o, err := object(raw, where)
		if err != nil {
			return nil, err
		}
		if _, ok := o[sideKey]; !ok {
			out[i] = compact(raw)
			continue
		}
		// Rebuild the object without the side field, keeping the other
		// fields in their original order.
		dec := json.NewDecoder(bytes.NewReader(raw))
		b := newObj()
		if _, err := dec.Token(); err != nil { // {
			return nil, bad(where, "%v", err)
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil, bad(where, "%v", err)
			}
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return nil, bad(where, "%v", err)
			}
			if k := tok.(string); k != sideKey {
				b.raw(k, compact(v))
			}
		}
		out[i] = b.done()
	}
	return arrayOf(out), nil
}

// splitHistory checks that history is a JSON array of at most MaxMessages
// elements and returns the elements.
func splitHistory(history json.RawMessage) ([]json.RawMessage, error) {
	if len(bytes.TrimSpace(history)) == 0 {
		return nil, fmt.Errorf("translate: history is empty; want a JSON array of messages: %w", ErrInvalidHistory)
	}
	if !json.Valid(history) {
		var v any
		err := json.Unmarshal(history, &v)
		return nil, fmt.Errorf("translate: history is not valid JSON (%v): %w", err, ErrInvalidHistory)
	}
	if t := jsonType(history); t != "array" {
		return nil, fmt.Errorf("translate: history must be a JSON array of messages, not %s: %w", t, ErrInvalidHistory)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(history, &items); err != nil {
		return nil, fmt.Errorf("translate: history: %v: %w", err, ErrInvalidHistory)
	}
	if len(items) > MaxMessages {
		return nil, fmt.Errorf("translate: history has %d messages, more than the limit of %d: %w", len(items), MaxMessages, ErrInvalidHistory)
	}
	return items, nil
}
