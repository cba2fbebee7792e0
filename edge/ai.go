package edge

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/protocol/translate"
)

// maxConversationID caps the X-MCPV2-Conversation header.
const maxConversationID = 128

// chat is a provider-native chat request reduced to what ask takes.
type chat struct {
	system []string // system prompts, in order
	before []turn   // turns before the query
	query  string   // the last user message
	after  []turn   // turns after it (tool results of an agent loop, a prefill)
}

// turn is one message of the history as text.
type turn struct {
	role, text string
}

// askQuery is ask's query: the last user message, preceded (and followed)
// by the other turns as context text, so that a stateless responder sees the
// whole conversation.
func (c *chat) askQuery() string {
	if len(c.before) == 0 && len(c.after) == 0 {
		return c.query
	}
	var b strings.Builder
	if len(c.before) > 0 {
		b.WriteString("Earlier turns of this conversation:\n")
		for _, t := range c.before {
			b.WriteString(t.role + ": " + t.text + "\n")
		}
		b.WriteString("\n")
	}
	b.WriteString("Current message:\n" + c.query)
	if len(c.after) > 0 {
		b.WriteString("\n\nAfter it:\n")
		for _, t := range c.after {
			b.WriteString(t.role + ": " + t.text + "\n")
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// askArgs are the arguments of the ask skill (SPEC §3).
type askArgs struct {
	Query          string `json:"query"`
	ConversationID string `json:"conversation_id,omitempty"`
	System         string `json:"system,omitempty"`
}

// askResult is the result of the ask skill (SPEC §3).
type askResult struct {
	Response       string `json:"response"`
	Provider       string `json:"provider"`
	Model          string `json:"model"`
	Turn           int    `json:"turn"`
	ConversationID string `json:"conversation_id"`
}

// ai is POST /mcpv2/ai/{provider}: a provider-native chat request is
// answered by the ask skill, in that provider's native response shape.
func (s *Server) ai(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	q := requestFrom(r.Context())
	provider := r.PathValue("provider")
	if !protocol.ValidProvider(provider) {
		s.refuse(w, r, q, http.StatusBadRequest, protocol.Errorf(protocol.CodeUnsupportedProvider,
			"unsupported provider %q (want one of %s)", protocol.Clip(provider, 40), strings.Join(protocol.Providers, ", ")))
		return
	}
	conv := r.Header.Get(ConversationHeader)
	if !validConversationID(conv) {
		s.refuse(w, r, q, http.StatusBadRequest, protocol.Errorf(protocol.CodeInvalidParams,
			"invalid params: the %s header must be at most %d printable ASCII characters without spaces", ConversationHeader, maxConversationID))
		return
	}
	body, ok := s.ReadBody(w, r)
	if !ok {
		return
	}
	ch, perr := parseChat(provider, body)
	if perr != nil {
		s.log.Debug("ai request refused", "provider", provider, "remote", r.RemoteAddr, "err", perr.Message)
		s.refuse(w, r, q, ErrorStatus(perr), perr)
		return
	}

	args, _ := json.Marshal(askArgs{Query: ch.askQuery(), ConversationID: conv, System: strings.Join(ch.system, "\n\n")})
	params, _ := json.Marshal(protocol.CallParams{Name: "ask", Arguments: args})
	msg, _ := json.Marshal(protocol.Slot{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: protocol.MethodToolsCall,
		Params: params, Context: &protocol.SlotContext{Provider: provider}})
	out, refused := s.b.Handle(r.Context(), c, msg)
	// Handle has audited the call; only the answer remains to be written.
	if refused != nil {
		s.writeError(w, refused)
		return
	}
	resps, err := protocol.ParseResponses(out)
	if err != nil || len(resps) != 1 {
		s.log.Error("ai: the node answered ask with a malformed response", "err", err, "responses", len(resps))
		s.writeError(w, protocol.Errorf(protocol.CodeInternal, "internal error"))
		return
	}
	if resps[0].Error != nil {
		s.writeError(w, resps[0].Error)
		return
	}
	var res askResult
	if err := protocol.Unmarshal(resps[0].Result, &res); err != nil {
		s.log.Error("ai: the ask result is not ask's shape", "err", err)
		s.writeError(w, protocol.Errorf(protocol.CodeInternal, "internal error"))
		return
	}
	if res.ConversationID != "" && validConversationID(res.ConversationID) {
		w.Header().Set(ConversationHeader, res.ConversationID)
	}
	if res.Turn > 0 {
		w.Header().Set(TurnHeader, strconv.Itoa(res.Turn))
	}
	in := estimateTokens(strings.Join(ch.system, "\n\n")) + estimateTokens(ch.askQuery())
	writeJSON(w, http.StatusOK, nativeAnswer(provider, res, in, estimateTokens(res.Response), s.cfg.Now().Unix()))
}

// writeError writes an error that Handle has already audited, with the
// status ErrorStatus gives it (429 with Retry-After).
func (s *Server) writeError(w http.ResponseWriter, e *protocol.Error) {
	status := ErrorStatus(e)
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", strconv.Itoa(ErrorRetryAfter(e)))
	}
	writeJSON(w, status, protocol.ErrorResponse(nil, e))
}

func validConversationID(s string) bool {
	if len(s) > maxConversationID {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// estimateTokens estimates a token count as a quarter of the characters,
// rounded up. mcpv2 runs no tokenizer; the usage fields are estimates.
func estimateTokens(s string) int {
	return (utf8.RuneCountInString(s) + 3) / 4
}

// parseChat decodes a provider-native chat request: the system prompt and
// the history. The history is normalised through package translate into the
// OpenAI form, so that one reader serves all four providers.
func parseChat(provider string, body []byte) (*chat, *protocol.Error) {
	body = bytes.TrimSpace(body)
	if !protocol.ValidJSON(body) {
		return nil, protocol.Errorf(protocol.CodeParseError, "parse error: the %s request is not valid JSON", provider)
	}
	var top map[string]json.RawMessage
	if body[0] != '{' || protocol.Unmarshal(body, &top) != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "invalid request: a %s request must be a JSON object", provider)
	}
	bad := func(format string, args ...any) (*chat, *protocol.Error) {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params: %s request: %s", provider, fmt.Sprintf(format, args...))
	}
	if st, ok := top["stream"]; ok && string(st) != "false" && string(st) != "null" {
		return bad("stream is not supported by this edge; send \"stream\": false or leave it out")
	}
	var system []string
	historyKey := "messages"
	switch provider {
	case "claude":
		var err error
		if system, err = translate.SystemText(provider, top["system"]); err != nil {
			return bad("system: %v", err)
		}
	case "gemini":
		historyKey = "contents"
		si := top["systemInstruction"]
		if si == nil {
			si = top["system_instruction"]
		}
		var err error
		if system, err = translate.SystemText(provider, si); err != nil {
			return bad("systemInstruction: %v", err)
		}
	}
	history := top[historyKey]
	if len(history) == 0 || string(history) == "null" {
		return bad("%s is missing", historyKey)
	}
	if provider == "gemini" {
		// The Gemini API lets a single-turn request leave role out ("user").
		var err error
		if history, err = defaultGeminiRoles(history); err != nil {
			return bad("%s: %v", historyKey, err)
		}
	}
	msgs, err := translate.Translate(history, provider, "openai")
	if err != nil {
		if errors.Is(err, translate.ErrUnknownProvider) {
			return nil, protocol.Errorf(protocol.CodeUnsupportedProvider, "unsupported provider %q", provider)
		}
		return bad("%s: %s", historyKey, strings.TrimPrefix(err.Error(), "translate: "))
	}
	ch, err := readOpenAI(msgs)
	if err != nil {
		return bad("%s: %v", historyKey, err)
	}
	ch.system = append(system, ch.system...)
	return ch, nil
}

// defaultGeminiRoles sets role "user" on contents that have none.
func defaultGeminiRoles(history json.RawMessage) (json.RawMessage, error) {
	var items []json.RawMessage
	if err := protocol.Unmarshal(history, &items); err != nil {
		return nil, errors.New("want an array of Content objects")
	}
	changed := false
	for i, it := range items {
		var m map[string]json.RawMessage
		if protocol.Unmarshal(it, &m) != nil {
			continue // translate names the problem
		}
		if _, ok := m["role"]; ok {
			continue
		}
		m["role"] = json.RawMessage(`"user"`)
		b, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("content %d: %v", i, err)
		}
		items[i], changed = b, true
	}
	if !changed {
		return history, nil
	}
	return json.Marshal(items)
}

func nonEmpty(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return []string{s}
}

// readOpenAI turns a history in OpenAI form into a chat: system messages to
// system prompts, the last user message to the query, the rest to context.
func readOpenAI(history json.RawMessage) (*chat, error) {
	var msgs []translate.OpenAIMessage
	if err := protocol.Unmarshal(history, &msgs); err != nil {
		return nil, fmt.Errorf("unreadable history: %s", protocol.JSONErrorText(err))
	}
	ch := &chat{}
	var turns []turn
	last := -1
	for _, m := range msgs {
		text := translate.ContentText(m.Content)
		switch m.Role {
		case "system", "developer":
			ch.system = append(ch.system, nonEmpty(text)...)
			continue
		case "assistant":
			var parts []string
			if strings.TrimSpace(text) != "" {
				parts = append(parts, text)
			}
			if m.Refusal != nil && *m.Refusal != "" {
				parts = append(parts, "[refused: "+*m.Refusal+"]")
			}
			for _, tc := range m.ToolCalls {
				parts = append(parts, fmt.Sprintf("[called tool %s with %s]", tc.Function.Name, tc.Function.Arguments))
			}
			text = strings.Join(parts, " ")
		case "tool", "function":
			id := m.ToolCallID
			if id == "" {
				id = m.Name
			}
			text = fmt.Sprintf("[result of %s] %s", id, text)
		case "user":
			if strings.TrimSpace(text) != "" {
				last = len(turns)
			}
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		turns = append(turns, turn{role: m.Role, text: text})
	}
	if last < 0 {
		return nil, errors.New("no user message to answer")
	}
	ch.before, ch.query, ch.after = turns[:last], turns[last].text, turns[last+1:]
	return ch, nil
}

// nativeAnswer shapes ask's result as provider's chat response. in and out
// are token estimates; created is the unix time of the answer.
func nativeAnswer(provider string, res askResult, in, out int, created int64) any {
	switch provider {
	case "claude":
		return translate.ClaudeResponse{
			ID: "msg_" + randomHex(12), Type: "message", Role: "assistant", Model: res.Model,
			Content:    []translate.ClaudeBlock{{Type: "text", Text: &res.Response}},
			StopReason: "end_turn",
			Usage:      translate.ClaudeUsage{InputTokens: in, OutputTokens: out},
		}
	case "gemini":
		return translate.GeminiResponse{
			Candidates: []translate.GeminiCandidate{{
				Content:      translate.GeminiContent{Role: "model", Parts: []translate.GeminiPart{{Text: &res.Response}}},
				FinishReason: "STOP",
			}},
			UsageMetadata: translate.GeminiUsage{PromptTokenCount: in, CandidatesTokenCount: out, TotalTokenCount: in + out},
			ModelVersion:  res.Model,
			ResponseID:    randomHex(12),
		}
	default: // openai, deepseek
		return translate.OpenAIResponse{
			ID: "chatcmpl-" + randomHex(12), Object: "chat.completion", Created: created, Model: res.Model,
			Choices: []translate.OpenAIChoice{{
				Message:      translate.OpenAIMessage{Role: "assistant", Content: translate.TextContent(res.Response)},
				FinishReason: "stop",
			}},
			Usage: translate.OpenAIUsage{PromptTokens: in, CompletionTokens: out, TotalTokens: in + out},
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
