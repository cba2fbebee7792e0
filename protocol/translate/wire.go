package translate

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The providers' request and response bodies, as their APIs define them, with
// the fields this project sends or reads. They are the one definition of each
// provider's wire format in the module: the llm backends of node/llm encode
// requests and decode answers with them, and the HTTP edge reads requests and
// writes answers with them. Histories (the messages of a request) are
// converted between the formats by Translate, which reads them field by field
// and so keeps what these structs leave out.
//
// A message's content is a union in the Claude and OpenAI APIs (a string, or
// an array of typed blocks), so it stays raw JSON: ContentText reads its text
// and TextContent writes a string. The structs are decoded with the
// protocol's rules (exact member names, UTF-8); the package itself only
// encodes them.

// --- Claude: the Anthropic Messages API (POST /v1/messages)

// ClaudeRequest is the body of a Messages API request.
type ClaudeRequest struct {
	// Model names the model, for example "claude-sonnet-4-5".
	Model string `json:"model"`
	// MaxTokens caps the answer; the API requires it.
	MaxTokens int `json:"max_tokens"`
	// System is the system prompt: a JSON string or an array of text blocks
	// (SystemText reads either). Empty leaves the field out.
	System json.RawMessage `json:"system,omitempty"`
	// Messages is the conversation, alternating user and assistant turns.
	Messages []ClaudeMessage `json:"messages"`
}

// ClaudeMessage is one turn of a Messages API conversation.
type ClaudeMessage struct {
	// Role is "user" or "assistant".
	Role string `json:"role"`
	// Content is a JSON string or an array of content blocks.
	Content json.RawMessage `json:"content"`
}

// ClaudeBlock is one content block of a Messages API answer: text, thinking
// or tool_use (the API has more types; they decode with Type only).
type ClaudeBlock struct {
	// Type is the block type: "text", "thinking", "tool_use", ….
	Type string `json:"type"`
	// Text is the text of a text block; nil in other blocks.
	Text *string `json:"text,omitempty"`
	// Thinking is the reasoning of a thinking block.
	Thinking string `json:"thinking,omitempty"`
	// Signature is the signature of a thinking block.
	Signature string `json:"signature,omitempty"`
	// ID is the id of a tool_use block.
	ID string `json:"id,omitempty"`
	// Name is the tool name of a tool_use block.
	Name string `json:"name,omitempty"`
	// Input is the JSON object of a tool_use block's arguments.
	Input json.RawMessage `json:"input,omitempty"`
}

// ClaudeUsage is the token count of a Messages API answer.
type ClaudeUsage struct {
	// InputTokens counts the tokens of the request.
	InputTokens int `json:"input_tokens"`
	// OutputTokens counts the tokens of the answer.
	OutputTokens int `json:"output_tokens"`
}

// ClaudeError is the error object of a Messages API error body,
// {"type":"error","error":{"type":…,"message":…}}.
type ClaudeError struct {
	// Type is the error type, for example "overloaded_error".
	Type string `json:"type"`
	// Message is the provider's description.
	Message string `json:"message"`
}

// ClaudeResponse is the body of a Messages API answer, or of an error
// (Type "error" and Error set), which some proxies send with status 200.
type ClaudeResponse struct {
	// ID is the message id, "msg_…".
	ID string `json:"id"`
	// Type is "message", or "error" for an error body.
	Type string `json:"type"`
	// Role is "assistant".
	Role string `json:"role"`
	// Model is the model that answered.
	Model string `json:"model"`
	// Content holds the answer's blocks.
	Content []ClaudeBlock `json:"content"`
	// StopReason says why the answer ended: "end_turn", "max_tokens",
	// "tool_use", "refusal", ….
	StopReason string `json:"stop_reason"`
	// StopSequence is the stop sequence that ended the answer, or nil.
	StopSequence *string `json:"stop_sequence"`
	// Usage counts the tokens.
	Usage ClaudeUsage `json:"usage"`
	// Error is set in an error body; nil otherwise (and then left out).
	Error *ClaudeError `json:"error,omitempty"`
}

// --- OpenAI: Chat Completions (POST /v1/chat/completions), and the servers
// compatible with it (DeepSeek, llama.cpp, vLLM, Ollama, …)

// OpenAIRequest is the body of a Chat Completions request.
type OpenAIRequest struct {
	// Model names the model.
	Model string `json:"model"`
	// Messages is the conversation, system messages included.
	Messages []OpenAIMessage `json:"messages"`
	// MaxTokens caps the answer (compatible servers); zero leaves it out.
	MaxTokens int `json:"max_tokens,omitempty"`
	// MaxCompletionTokens caps the answer (api.openai.com); zero leaves it
	// out.
	MaxCompletionTokens int `json:"max_completion_tokens,omitempty"`
	// Stream asks for server-sent events; always written.
	Stream bool `json:"stream"`
}

// OpenAIMessage is one message of a Chat Completions conversation, or the
// message of an answer's choice.
type OpenAIMessage struct {
	// Role is "system", "developer", "user", "assistant" or "tool".
	Role string `json:"role"`
	// Content is a JSON string, an array of content parts, or null (an
	// assistant message of tool calls only); nil is written as null.
	Content json.RawMessage `json:"content"`
	// Refusal is the assistant's refusal message, or nil.
	Refusal *string `json:"refusal,omitempty"`
	// Name is the author's name, if given.
	Name string `json:"name,omitempty"`
	// ToolCalls are the assistant's tool calls.
	ToolCalls []OpenAIToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is the call a "tool" message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// ReasoningContent is DeepSeek's reasoning of an assistant message.
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

// OpenAIToolCall is one tool call of an assistant message.
type OpenAIToolCall struct {
	// ID is the call's id, which the tool message names.
	ID string `json:"id"`
	// Type is "function".
	Type string `json:"type"`
	// Function is the called function.
	Function OpenAIFunctionCall `json:"function"`
}

// OpenAIFunctionCall is the function of a tool call.
type OpenAIFunctionCall struct {
	// Name is the function's name.
	Name string `json:"name"`
	// Arguments is the arguments' JSON text, as a string. (Translate also
	// reads an object, as some clients send it, and writes it as a string.)
	Arguments string `json:"arguments"`
}

// OpenAIChoice is one choice of a Chat Completions answer.
type OpenAIChoice struct {
	// Index is the choice's position.
	Index int `json:"index"`
	// Message is the answer.
	Message OpenAIMessage `json:"message"`
	// Logprobs are the log probabilities; nil is written as null.
	Logprobs json.RawMessage `json:"logprobs"`
	// FinishReason says why the answer ended: "stop", "length", ….
	FinishReason string `json:"finish_reason"`
}

// OpenAIUsage is the token count of a Chat Completions answer.
type OpenAIUsage struct {
	// PromptTokens counts the tokens of the request.
	PromptTokens int `json:"prompt_tokens"`
	// CompletionTokens counts the tokens of the answer.
	CompletionTokens int `json:"completion_tokens"`
	// TotalTokens is their sum.
	TotalTokens int `json:"total_tokens"`
}

// OpenAIResponse is the body of a Chat Completions answer.
type OpenAIResponse struct {
	// ID is the completion's id, "chatcmpl-…".
	ID string `json:"id"`
	// Object is "chat.completion".
	Object string `json:"object"`
	// Created is the Unix time of the answer.
	Created int64 `json:"created"`
	// Model is the model that answered.
	Model string `json:"model"`
	// Choices holds the answers; the first is the answer.
	Choices []OpenAIChoice `json:"choices"`
	// Usage counts the tokens.
	Usage OpenAIUsage `json:"usage"`
	// SystemFingerprint names the backend configuration, or nil.
	SystemFingerprint *string `json:"system_fingerprint"`
	// Error is not part of the API: some proxies answer 200 with an error
	// object here. Empty leaves it out.
	Error json.RawMessage `json:"error,omitempty"`
}

// --- Gemini: generateContent (POST /v1beta/{model}:generateContent)

// GeminiRequest is the body of a generateContent request.
type GeminiRequest struct {
	// Contents is the conversation.
	Contents []GeminiContent `json:"contents"`
	// SystemInstruction is the system prompt, or nil.
	SystemInstruction *GeminiContent `json:"systemInstruction,omitempty"`
	// GenerationConfig holds the generation settings, or nil.
	GenerationConfig *GeminiGenerationConfig `json:"generationConfig,omitempty"`
}

// GeminiContent is one turn of a conversation, a system instruction, or a
// candidate's answer.
type GeminiContent struct {
	// Role is "user" or "model"; empty leaves it out.
	Role string `json:"role,omitempty"`
	// Parts are the turn's parts.
	Parts []GeminiPart `json:"parts"`
}

// GeminiPart is one part of a Content. The API's Part holds one of text,
// inlineData, functionCall, functionResponse, …; the fields here are the
// text ones.
type GeminiPart struct {
	// Text is the text of a text part; nil in other parts.
	Text *string `json:"text,omitempty"`
	// Thought marks a part of the model's reasoning.
	Thought bool `json:"thought,omitempty"`
}

// GeminiGenerationConfig holds the generation settings of a request.
type GeminiGenerationConfig struct {
	// MaxOutputTokens caps the answer; zero leaves it out.
	MaxOutputTokens int `json:"maxOutputTokens,omitempty"`
}

// GeminiCandidate is one candidate answer.
type GeminiCandidate struct {
	// Content is the answer.
	Content GeminiContent `json:"content"`
	// FinishReason says why the answer ended: "STOP", "MAX_TOKENS", ….
	FinishReason string `json:"finishReason"`
	// Index is the candidate's position.
	Index int `json:"index"`
}

// GeminiPromptFeedback says why a prompt was blocked.
type GeminiPromptFeedback struct {
	// BlockReason is the reason, for example "SAFETY"; empty when the
	// prompt was not blocked.
	BlockReason string `json:"blockReason"`
	// BlockReasonMessage describes it.
	BlockReasonMessage string `json:"blockReasonMessage,omitempty"`
}

// GeminiUsage is the token count of a generateContent answer.
type GeminiUsage struct {
	// PromptTokenCount counts the tokens of the request.
	PromptTokenCount int `json:"promptTokenCount"`
	// CandidatesTokenCount counts the tokens of the answers.
	CandidatesTokenCount int `json:"candidatesTokenCount"`
	// TotalTokenCount is their sum.
	TotalTokenCount int `json:"totalTokenCount"`
}

// GeminiResponse is the body of a generateContent answer.
type GeminiResponse struct {
	// Candidates holds the answers; the first is the answer.
	Candidates []GeminiCandidate `json:"candidates"`
	// PromptFeedback is set when the prompt was blocked; nil is left out.
	PromptFeedback *GeminiPromptFeedback `json:"promptFeedback,omitempty"`
	// UsageMetadata counts the tokens.
	UsageMetadata GeminiUsage `json:"usageMetadata"`
	// ModelVersion is the model that answered.
	ModelVersion string `json:"modelVersion"`
	// ResponseID is the answer's id.
	ResponseID string `json:"responseId"`
}

// --- Content and system prompts

// TextContent returns s as a message content of the Claude and OpenAI APIs: a
// JSON string.
func TextContent(s string) json.RawMessage {
	return quote(s)
}

// ContentText returns the text of a Claude or OpenAI message content, for a
// reader that takes text only. A string is its own text. An array of parts
// gives the text of each part, one per line: a text part its text, a refusal
// part "[refused: <refusal>]", an image "[image]", audio "[audio]", and any
// other part its type in brackets, such as "[tool_use]", so that the reader
// still sees that something was there. Empty text parts keep their (empty)
// line. null, an absent content, and anything else (a number, an array with
// something else than objects or null, a part whose type, text or refusal is not a string, text
// that is not UTF-8) give "".
//
// Member names match exactly, as protocol.Unmarshal matches them.
func ContentText(raw json.RawMessage) string {
	if !utf8.Valid(raw) {
		return ""
	}
	switch jsonType(raw) {
	case "string":
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return s
	case "array":
	default:
		return ""
	}
	var parts []jobj
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	out := make([]string, 0, len(parts))
	for _, p := range parts { // a null part reads as {}
		typ, ok1 := optString(p, "type")
		text, ok2 := optString(p, "text")
		refusal, ok3 := optString(p, "refusal")
		if !ok1 || !ok2 || !ok3 {
			return ""
		}
		switch typ {
		case "text":
			out = append(out, text)
		case "refusal":
			out = append(out, "[refused: "+refusal+"]")
		case "image_url":
			out = append(out, "[image]")
		case "input_audio":
			out = append(out, "[audio]")
		default:
			out = append(out, "["+clip(typ, 40)+"]")
		}
	}
	return strings.Join(out, "\n")
}

// optString reads an optional string member: "" when it is absent or null,
// ok false when it holds anything else.
func optString(o jobj, key string) (s string, ok bool) {
	raw, present := o[key]
	if !present || jsonType(raw) == "null" {
		return "", true
	}
	if jsonType(raw) != "string" || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// clip cuts s to n bytes, marking a cut with "…" (as protocol.Clip does).
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// SystemText returns the system prompts of a request in provider's format,
// without blank ones, from raw, the request's system field:
//
//   - claude: "system", a JSON string or an array of text blocks
//     ({"type":"text","text":…}, other members such as cache_control
//     ignored); a block of another type is an error.
//   - openai, deepseek: a system message's content, which has the same
//     two forms.
//   - gemini: "systemInstruction", a Content ({"parts":[{"text":…}]},
//     every part a text part), or a plain string as some SDKs send it.
//
// An absent (empty) or null raw gives none. The error says what is wrong,
// without a package prefix, for the caller to put after the field's name; an
// unknown provider is ErrUnknownProvider. Member names match exactly.
func SystemText(provider string, raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || jsonType(raw) == "null" {
		return nil, nil
	}
	if !knownProvider(provider) {
		return nil, fmt.Errorf("translate: provider %q (want claude, openai, gemini or deepseek): %w", provider, ErrUnknownProvider)
	}
	if !utf8.Valid(raw) || !json.Valid(raw) {
		return nil, errors.New("not valid JSON")
	}
	if jsonType(raw) == "string" {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return nonBlank(s), nil
	}
	if provider == provGemini {
		return geminiSystemText(raw)
	}
	const want = "want a string or an array of text blocks"
	var blocks []jobj
	if jsonType(raw) != "array" || json.Unmarshal(raw, &blocks) != nil {
		return nil, errors.New(want)
	}
	var out []string
	for i, b := range blocks { // a null block reads as {}
		typ, ok1 := optString(b, "type")
		text, ok2 := optString(b, "text")
		if !ok1 || !ok2 {
			return nil, errors.New(want)
		}
		if typ != "text" {
			return nil, fmt.Errorf("block %d: type %q (want \"text\")", i, clip(typ, 40))
		}
		out = append(out, nonBlank(text)...)
	}
	return out, nil
}

// geminiSystemText reads a systemInstruction Content.
func geminiSystemText(raw json.RawMessage) ([]string, error) {
	wantErr := errors.New(`want a Content object {"parts":[{"text":…}]}`)
	var c jobj
	if jsonType(raw) != "object" || json.Unmarshal(raw, &c) != nil {
		return nil, wantErr
	}
	for k := range c { // a misspelt "Parts" would lose the prompt unsaid
		if k != "parts" && k != "role" {
			return nil, fmt.Errorf(`member %q (a Content has "role" and "parts")`, clip(k, 40))
		}
	}
	var parts []jobj
	if p, ok := c["parts"]; ok && jsonType(p) != "null" {
		if jsonType(p) != "array" || json.Unmarshal(p, &parts) != nil {
			return nil, wantErr
		}
	}
	var out []string
	for i, p := range parts {
		var t json.RawMessage
		if p != nil {
			t = p["text"]
		}
		if len(t) == 0 || jsonType(t) == "null" {
			return nil, fmt.Errorf("part %d has no text", i)
		}
		var s string
		if jsonType(t) != "string" || json.Unmarshal(t, &s) != nil {
			return nil, wantErr
		}
		out = append(out, nonBlank(s)...)
	}
	return out, nil
}

// nonBlank returns s alone, or nothing when s is only white space.
func nonBlank(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return []string{s}
}
