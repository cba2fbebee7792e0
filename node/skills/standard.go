package skills

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mcpv2/mcpv2/node/guard"
	"github.com/mcpv2/mcpv2/node/llm"
	"github.com/mcpv2/mcpv2/node/store"
	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/protocol/translate"
)

// Limits are the limits a node advertises in negotiate and its agent card.
type Limits struct {
	MaxBatch   int     `json:"max_batch"`
	MaxMessage int     `json:"max_message"`
	RateLimit  float64 `json:"rate_limit"`
}

// Conversations keeps LLM-mode histories; *store.Store satisfies it.
type Conversations interface {
	AppendTurns(key string, turns ...store.Turn) (int, error)
	History(key string, max int) ([]store.Turn, error)
}

// Deps are what the standard skills need from their node.
type Deps struct {
	// PeerID is the node's own PeerID (ping, pay ids).
	PeerID string
	// Files is the file store of the file skills.
	Files *store.Files
	// Conversations keeps LLM-mode histories; required when LLMMode is set.
	Conversations Conversations
	// LLM answers ask and process_instructions.
	LLM llm.Backend
	// LLMMode keeps per-conversation history (SPEC §3).
	LLMMode bool
	// HistoryTurns is how many past turns ask sends to the backend (default 50).
	HistoryTurns int
	// Limits are advertised by negotiate.
	Limits Limits
	// Capabilities are the capabilities negotiate offers.
	Capabilities []string
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// StandardNames are the standard skills, in their registration order: the
// ten of SPEC §3, and read_file (docs/spec.md §3), which the MCP face's
// file resources are read through.
var StandardNames = []string{"ping", "ask", "upload_file", "list_files", "process_instructions", "delete_file", "get_skill", "pay", "negotiate", "translate_history", "read_file"}

// processContextBytes is how much of a file process_instructions hands to the
// LLM backend; stats always cover the whole file.
const processContextBytes = 64 << 10

// RegisterStandard adds the standard skills (StandardNames) to r.
func RegisterStandard(r *Registry, d Deps) {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.HistoryTurns <= 0 {
		d.HistoryTurns = 50
	}
	s := &standard{Deps: d, reg: r}
	Add(r, "ping", "Liveness check: answers pong with this peer's id and clock, echoing payload.", []string{"core", "health"}, s.ping, ReadOnly())
	Add(r, "ask", "Ask this agent's LLM backend a question; in LLM mode the conversation keeps its history.", []string{"core", "llm", "chat"}, s.ask)
	Add(r, "upload_file", "Store a file in this agent's file store (atomic write; utf-8 or base64 content).", []string{"core", "files"}, s.upload, enumProp("encoding", "utf-8", "base64"))
	Add(r, "list_files", "List the files in this agent's file store with size, sha256 and modification time.", []string{"core", "files"}, s.list, ReadOnly())
	Add(r, "process_instructions", "Run instructions over a stored file with the LLM backend; returns the answer and the file's stats.", []string{"core", "files", "llm"}, s.process)
	Add(r, "delete_file", "Delete a file from this agent's file store.", []string{"core", "files"}, s.delete)
	Add(r, "get_skill", "Describe one skill of this agent without running it.", []string{"core", "meta"}, s.getSkill, ReadOnly())
	Add(r, "pay", "Payment stub: records an intent and moves nothing.", []string{"core", "payments"}, s.pay, exclusiveMin("amount", 0))
	Add(r, "negotiate", "Agree on protocol version, providers and capabilities; returns this agent's limits.", []string{"core", "meta"}, s.negotiate, minItems("protocol_versions", 1))
	// The guard scans every string argument (guard.DefaultPlan); these
	// name the kinds of the ones that matter, and leave out two that are
	// data, not instructions: ping's payload, an echo that reaches nobody
	// but its sender, and upload_file's content, the bytes of a file of
	// any size (up to the store's quota; block mode refuses what it cannot
	// scan whole, so scanning it would refuse every upload over 1 MiB).
	mustGuard(r, "ping", map[string]guard.Kind{"payload": guard.Off})
	mustGuard(r, "ask", map[string]guard.Kind{"query": guard.Prompt, "system": guard.Prompt})
	mustGuard(r, "process_instructions", map[string]guard.Kind{"instructions": guard.Prompt, "filename": guard.Path})
	mustGuard(r, "upload_file", map[string]guard.Kind{"filename": guard.Path, "content": guard.Off})
	mustGuard(r, "delete_file", map[string]guard.Kind{"filename": guard.Path})
	Add(r, "translate_history", "Translate a chat history between the claude, openai, gemini and deepseek message formats.", []string{"core", "llm", "translate"}, s.translate, typeProp("history", "array"), ReadOnly())
	Add(r, "read_file", fmt.Sprintf("Read a stored file, or a page of it (offset, length up to %d bytes): utf-8 text or base64, with its size, sha256 and MIME type.", MaxReadLength),
		[]string{"core", "files"}, s.read, minimum("offset", 0), minimum("length", 1), maximum("length", MaxReadLength), ReadOnly())
	mustGuard(r, "read_file", map[string]guard.Kind{"filename": guard.Path})
}

// mustGuard is SetGuard for a skill registered just before: a failure is a
// programming error.
func mustGuard(r *Registry, skill string, fields map[string]guard.Kind) {
	if err := r.SetGuard(skill, fields); err != nil {
		panic(err.Error())
	}
}

type standard struct {
	Deps
	reg *Registry
}

func enumProp(name string, values ...any) SchemaOption {
	return func(s *jsonschema.Schema) { s.Properties[name].Enum = values }
}

func typeProp(name, typ string) SchemaOption {
	return func(s *jsonschema.Schema) { s.Properties[name].Type = typ }
}

func exclusiveMin(name string, v float64) SchemaOption {
	return func(s *jsonschema.Schema) { s.Properties[name].ExclusiveMinimum = &v }
}

func minimum(name string, v float64) SchemaOption {
	return func(s *jsonschema.Schema) { s.Properties[name].Minimum = &v }
}

func maximum(name string, v float64) SchemaOption {
	return func(s *jsonschema.Schema) { s.Properties[name].Maximum = &v }
}

func minItems(name string, n int) SchemaOption {
	return func(s *jsonschema.Schema) { s.Properties[name].MinItems = &n }
}

// --- ping

// PingArgs are ping's arguments.
type PingArgs struct {
	Payload any `json:"payload,omitempty" jsonschema:"anything; echoed back"`
}

// PingResult is ping's result.
type PingResult struct {
	Pong       bool   `json:"pong"`
	PeerID     string `json:"peer_id"`
	TimeUnixMS int64  `json:"time_unix_ms"`
	Payload    any    `json:"payload,omitempty"`
}

func (s *standard) ping(_ context.Context, a PingArgs) (*PingResult, error) {
	return &PingResult{Pong: true, PeerID: s.PeerID, TimeUnixMS: s.Now().UnixMilli(), Payload: a.Payload}, nil
}

// --- ask

// AskArgs are ask's arguments.
type AskArgs struct {
	Query          string `json:"query" jsonschema:"the question or instruction"`
	ConversationID string `json:"conversation_id,omitempty" jsonschema:"LLM mode: the conversation to continue"`
	System         string `json:"system,omitempty" jsonschema:"a system prompt"`
	Model          string `json:"model,omitempty" jsonschema:"the backend model to use"`
}

// AskResult is ask's result.
type AskResult struct {
	Response       string `json:"response"`
	Provider       string `json:"provider"`
	Model          string `json:"model"`
	Turn           int    `json:"turn"`
	ConversationID string `json:"conversation_id"`
}

func (s *standard) ask(ctx context.Context, a AskArgs) (AskResult, error) {
	if strings.TrimSpace(a.Query) == "" {
		return AskResult{}, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for ask: query is empty")
	}
	ci := CallInfoFrom(ctx)
	req := llm.Request{Model: a.Model, System: a.System}
	key := ""
	if s.LLMMode {
		if a.ConversationID == "" {
			a.ConversationID = newID("conv")
		}
		key = ci.Caller + "\x00" + a.ConversationID
		past, err := s.Conversations.History(key, s.HistoryTurns)
		if err != nil {
			return AskResult{}, fmt.Errorf("ask: load history: %w", err)
		}
		for _, t := range past {
			req.Messages = append(req.Messages, llm.Message{Role: t.Role, Content: t.Content})
		}
	}
	req.Messages = append(req.Messages, llm.Message{Role: "user", Content: a.Query})
	resp, err := s.LLM.Complete(ctx, req)
	if err != nil {
		return AskResult{}, backendError("ask", s.LLM.Name(), err)
	}
	turn := 1
	if s.LLMMode {
		now := s.Now()
		n, err := s.Conversations.AppendTurns(key,
			store.Turn{Role: "user", Content: a.Query, Time: now},
			store.Turn{Role: "assistant", Content: resp.Text, Time: now})
		if err != nil {
			return AskResult{}, fmt.Errorf("ask: save history: %w", err)
		}
		turn = (n + 1) / 2
	}
	return AskResult{Response: resp.Text, Provider: s.LLM.Name(), Model: resp.Model, Turn: turn, ConversationID: a.ConversationID}, nil
}

// backendError maps an LLM failure to a protocol error. A request the
// backend refused as malformed (a bad model name) is the caller's -32602; a
// remote answer passes on its status and the provider's own message; a
// transport failure says only that, since its text names internal URLs.
func backendError(skill, backend string, err error) error {
	var le *llm.Error
	switch {
	case errors.Is(err, llm.ErrInvalidRequest):
		return protocol.Errorf(protocol.CodeInvalidParams, "invalid params for %s: %v", skill, err)
	case errors.As(err, &le) && le.StatusCode > 0:
		return protocol.Errorf(protocol.CodeToolExecution, "%s: the %s backend answered HTTP %d: %s", skill, backend, le.StatusCode, le.Message)
	case errors.Is(err, context.DeadlineExceeded):
		return protocol.Errorf(protocol.CodeToolExecution, "%s: the %s backend timed out", skill, backend)
	}
	return protocol.Errorf(protocol.CodeToolExecution, "%s: the %s backend failed or is unreachable", skill, backend)
}

// --- files

// UploadArgs are upload_file's arguments.
type UploadArgs struct {
	Filename string `json:"filename" jsonschema:"a plain file name, no directories"`
	Content  string `json:"content" jsonschema:"the file's content"`
	Encoding string `json:"encoding,omitempty" jsonschema:"utf-8 (default) or base64"`
}

// FileResult is upload_file's result.
type FileResult struct {
	Filename string `json:"filename"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
}

func (s *standard) upload(_ context.Context, a UploadArgs) (FileResult, error) {
	var r io.Reader = strings.NewReader(a.Content)
	var dec *errReader
	if a.Encoding == "base64" {
		dec = &errReader{r: base64.NewDecoder(base64.StdEncoding, r)}
		r = dec
	}
	fi, err := s.Files.Write(a.Filename, r)
	if dec != nil && dec.err != nil {
		// The decoder's only errors are malformed or truncated input.
		return FileResult{}, protocol.Errorf(protocol.CodeInvalidParams, "upload_file: content is not valid base64: %v", dec.err)
	}
	if err != nil {
		return FileResult{}, fileError("upload_file", a.Filename, err)
	}
	return FileResult{Filename: fi.Filename, Size: fi.Size, SHA256: fi.SHA256}, nil
}

// errReader remembers the first error of r other than io.EOF, so that a
// decoding failure can be told apart from a storage failure.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

// fileError maps store errors to protocol errors. Store errors name the file
// but never the host path, so their text is safe to send.
func fileError(skill, name string, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return protocol.Errorf(protocol.CodeFileNotFound, "%s: file not found: %q", skill, name)
	case errors.Is(err, store.ErrInvalidName), errors.Is(err, store.ErrTooLarge):
		return protocol.Errorf(protocol.CodeInvalidParams, "%s: %v", skill, err)
	}
	return err
}

// ListArgs are list_files's (empty) arguments.
type ListArgs struct{}

// ListResult is list_files's result.
type ListResult struct {
	Files []store.FileInfo `json:"files"`
}

func (s *standard) list(ctx context.Context, _ ListArgs) (ListResult, error) {
	fs, err := s.Files.ListContext(ctx)
	if err != nil {
		return ListResult{}, err
	}
	if fs == nil {
		fs = []store.FileInfo{}
	}
	return ListResult{Files: fs}, nil
}

// ProcessArgs are process_instructions's arguments.
type ProcessArgs struct {
	Filename     string `json:"filename" jsonschema:"a stored file"`
	Instructions string `json:"instructions" jsonschema:"what to do with the file"`
}

// ProcessStats counts a file's bytes, lines and words.
type ProcessStats struct {
	Bytes int64 `json:"bytes"`
	Lines int64 `json:"lines"`
	Words int64 `json:"words"`
}

// ProcessResult is process_instructions's result.
type ProcessResult struct {
	Filename string       `json:"filename"`
	Result   string       `json:"result"`
	Stats    ProcessStats `json:"stats"`
}

func (s *standard) process(ctx context.Context, a ProcessArgs) (ProcessResult, error) {
	f, _, err := s.Files.OpenHash(ctx, a.Filename, store.HashNone) // its stats read the file; no digest is reported
	if err != nil {
		return ProcessResult{}, fileError("process_instructions", a.Filename, err)
	}
	defer f.Close()
	var head bytes.Buffer
	st, err := countStats(io.TeeReader(f, &limitedWriter{w: &head, n: processContextBytes}))
	if err != nil {
		return ProcessResult{}, err
	}
	prompt := fmt.Sprintf("Instructions: %s\n\nFile %q (%d bytes, %d lines, %d words", a.Instructions, a.Filename, st.Bytes, st.Lines, st.Words)
	if st.Bytes > processContextBytes {
		prompt += fmt.Sprintf("; first %d bytes shown", processContextBytes)
	}
	prompt += "):\n" + head.String()
	resp, err := s.LLM.Complete(ctx, llm.Request{Messages: []llm.Message{{Role: "user", Content: prompt}}})
	if err != nil {
		return ProcessResult{}, backendError("process_instructions", s.LLM.Name(), err)
	}
	return ProcessResult{Filename: a.Filename, Result: resp.Text, Stats: st}, nil
}

// countStats counts bytes, lines (newlines, plus a final unterminated line)
// and whitespace-separated words, streaming.
func countStats(r io.Reader) (ProcessStats, error) {
	var st ProcessStats
	br := bufio.NewReaderSize(r, 64<<10)
	inWord, last := false, byte('\n')
	for {
		b, err := br.ReadByte()
		if err == io.EOF {
			break
		}
		if err != nil {
			return st, err
		}
		st.Bytes++
		last = b
		if b == '\n' {
			st.Lines++
		}
		if unicode.IsSpace(rune(b)) {
			inWord = false
		} else if !inWord {
			inWord = true
			st.Words++
		}
	}
	if st.Bytes > 0 && last != '\n' {
		st.Lines++
	}
	return st, nil
}

// limitedWriter keeps the first n bytes written and drops the rest.
type limitedWriter struct {
	w io.Writer
	n int64
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(int64(len(p)), l.n)
		l.n -= k
		l.w.Write(p[:k])
	}
	return len(p), nil
}

// DeleteArgs are delete_file's arguments.
type DeleteArgs struct {
	Filename string `json:"filename" jsonschema:"the file to delete"`
}

// DeleteResult is delete_file's result.
type DeleteResult struct {
	Filename string `json:"filename"`
	Deleted  bool   `json:"deleted"`
}

func (s *standard) delete(_ context.Context, a DeleteArgs) (DeleteResult, error) {
	if err := s.Files.Delete(a.Filename); err != nil {
		return DeleteResult{}, fileError("delete_file", a.Filename, err)
	}
	return DeleteResult{Filename: a.Filename, Deleted: true}, nil
}

// MaxReadLength is the most bytes one read_file call returns (base64 makes
// them 4/3 as many, well under the 8 MiB message cap); DefaultReadLength is
// what it returns when the call names no length.
const (
	MaxReadLength     = 4 << 20
	DefaultReadLength = 1 << 20
)

// ReadArgs are read_file's arguments.
type ReadArgs struct {
	Filename string `json:"filename" jsonschema:"the file to read"`
	Offset   int64  `json:"offset,omitempty" jsonschema:"the first byte to return (default 0)"`
	Length   int    `json:"length,omitempty" jsonschema:"how many bytes at most (default 1 MiB, at most 4 MiB)"`
}

// ReadResult is read_file's result: Length bytes from Offset, as utf-8 text
// when they are valid UTF-8, else base64.
type ReadResult struct {
	Filename string `json:"filename"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
	MIMEType string `json:"mime_type"`
	Offset   int64  `json:"offset"`
	Length   int    `json:"length"`
	// EOF is true when the page ends at the end of the file.
	EOF      bool   `json:"eof"`
	Encoding string `json:"encoding"`
	Content  string `json:"content"`
}

func (s *standard) read(ctx context.Context, a ReadArgs) (ReadResult, error) {
	n := a.Length
	if n == 0 {
		n = DefaultReadLength
	}
	f, info, err := s.Files.OpenHash(ctx, a.Filename, store.HashSHA256)
	if err != nil {
		return ReadResult{}, fileError("read_file", a.Filename, err)
	}
	defer f.Close()
	if a.Offset > info.Size {
		return ReadResult{}, protocol.Errorf(protocol.CodeInvalidParams, "read_file: offset %d is past the end of %q (%d bytes)", a.Offset, a.Filename, info.Size)
	}
	buf := make([]byte, min(int64(n), info.Size-a.Offset))
	if _, err := f.ReadAt(buf, a.Offset); err != nil && err != io.EOF {
		return ReadResult{}, protocol.Errorf(protocol.CodeInternal, "read_file: %q could not be read", a.Filename)
	}
	head := buf
	if a.Offset > 0 {
		head = make([]byte, min(512, info.Size))
		_, _ = f.ReadAt(head, 0)
	}
	r := ReadResult{Filename: info.Filename, Size: info.Size, SHA256: info.SHA256, MIMEType: MIMEType(info.Filename, head),
		Offset: a.Offset, Length: len(buf), EOF: a.Offset+int64(len(buf)) == info.Size, Encoding: "utf-8"}
	if utf8.Valid(buf) {
		r.Content = string(buf)
	} else {
		r.Encoding, r.Content = "base64", base64.StdEncoding.EncodeToString(buf)
	}
	return r, nil
}

// MIMEType names the media type of a file from its first bytes (head)
// and its name. Text (head valid UTF-8 without NUL) is its extension's
// type when that is a text type (text/html, application/json, …), else
// text/plain; charset=utf-8: the extension table guesses wrong for text
// as often as not (go.mod is not audio/x-mod, nor main.rs application/
// rls-services+xml). Anything else is its extension's type, else what
// http.DetectContentType sniffs.
func MIMEType(name string, head []byte) string {
	ext := mime.TypeByExtension(filepath.Ext(name))
	if len(head) > 0 && looksLikeText(head) {
		if isTextType(ext) {
			return ext
		}
		return "text/plain; charset=utf-8"
	}
	if ext != "" {
		return ext
	}
	return http.DetectContentType(head)
}

// looksLikeText reports whether head, the first bytes of a file, is UTF-8
// without NUL; a rune cut at its end is not held against it.
func looksLikeText(head []byte) bool {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(head); i++ {
		if tail := head[len(head)-i:]; utf8.RuneStart(tail[0]) {
			if !utf8.FullRune(tail) {
				head = head[:len(head)-i]
			}
			break
		}
	}
	return utf8.Valid(head) && !bytes.Contains(head, []byte{0})
}

// isTextType reports whether the media type t (with parameters or not) is
// text: text/*, JSON, XML (SVG, XHTML), JavaScript, YAML, TOML, SQL or a
// shell script.
func isTextType(t string) bool {
	t, _, _ = strings.Cut(t, ";")
	t = strings.TrimSpace(t)
	switch {
	case t == "":
		return false
	case strings.HasPrefix(t, "text/"):
		return true
	}
	switch t { // not every +xml: .rs is application/rls-services+xml
	case "application/json", "application/xml", "image/svg+xml", "application/xhtml+xml", "application/javascript", "application/x-javascript", "application/ecmascript",
		"application/yaml", "application/x-yaml", "application/toml", "application/x-sh", "application/sql":
		return true
	}
	return false
}

// --- get_skill

// GetSkillArgs are get_skill's arguments.
type GetSkillArgs struct {
	Name string `json:"name" jsonschema:"the skill to describe"`
}

func (s *standard) getSkill(_ context.Context, a GetSkillArgs) (protocol.SkillDescriptor, error) {
	d, ok := s.reg.Lookup(a.Name)
	if !ok {
		return d, s.reg.NotFound(a.Name)
	}
	return d, nil
}

// --- pay

// PayArgs are pay's arguments.
type PayArgs struct {
	Amount   float64 `json:"amount" jsonschema:"a positive amount"`
	Currency string  `json:"currency,omitempty" jsonschema:"ISO 4217 code or token symbol"`
	Memo     string  `json:"memo,omitempty"`
}

// PayResult is pay's stub result: nothing moves.
type PayResult struct {
	Status        string  `json:"status"`
	TransactionID string  `json:"transaction_id"`
	Stub          bool    `json:"stub"`
	Amount        float64 `json:"amount"`
	Currency      string  `json:"currency"`
}

func (s *standard) pay(_ context.Context, a PayArgs) (PayResult, error) {
	if !(a.Amount > 0) {
		return PayResult{}, protocol.Errorf(protocol.CodeInvalidParams, "invalid params for pay: amount must be > 0, got %v", a.Amount)
	}
	if a.Currency == "" {
		a.Currency = "USD"
	}
	return PayResult{Status: "pending", TransactionID: newID("tx"), Stub: true, Amount: a.Amount, Currency: a.Currency}, nil
}

// --- negotiate

// NegotiateArgs are negotiate's arguments.
type NegotiateArgs struct {
	ProtocolVersions []string `json:"protocol_versions" jsonschema:"versions the caller speaks, preferred first"`
	Providers        []string `json:"providers,omitempty" jsonschema:"provider formats the caller wants"`
	Capabilities     []string `json:"capabilities,omitempty" jsonschema:"capabilities the caller wants"`
}

// NegotiateResult is negotiate's result.
type NegotiateResult struct {
	ProtocolVersion string   `json:"protocol_version"`
	Providers       []string `json:"providers"`
	Capabilities    []string `json:"capabilities"`
	Limits          Limits   `json:"limits"`
}

func (s *standard) negotiate(_ context.Context, a NegotiateArgs) (NegotiateResult, error) {
	if !slices.Contains(a.ProtocolVersions, protocol.Version) {
		return NegotiateResult{}, &protocol.Error{Code: protocol.CodeVersionMismatch,
			Message: fmt.Sprintf("no common protocol version: this peer speaks %s", protocol.Version),
			Data:    map[string]any{"supported": []string{protocol.Version}}}
	}
	return NegotiateResult{
		ProtocolVersion: protocol.Version,
		Providers:       intersect(protocol.Providers, a.Providers),
		Capabilities:    intersect(s.Capabilities, a.Capabilities),
		Limits:          s.Limits,
	}, nil
}

// intersect returns the items of ours that want holds, or all of ours when
// want is empty, never nil.
func intersect(ours, want []string) []string {
	out := []string{}
	for _, o := range ours {
		if len(want) == 0 || slices.Contains(want, o) {
			out = append(out, o)
		}
	}
	return out
}

// --- translate_history

// TranslateArgs are translate_history's arguments.
type TranslateArgs struct {
	History json.RawMessage `json:"history" jsonschema:"messages in the from provider's native format"`
	From    string          `json:"from" jsonschema:"claude, openai, gemini or deepseek"`
	To      string          `json:"to" jsonschema:"claude, openai, gemini or deepseek"`
}

// TranslateResult is translate_history's result.
type TranslateResult struct {
	History json.RawMessage `json:"history"`
	From    string          `json:"from"`
	To      string          `json:"to"`
}

func (s *standard) translate(_ context.Context, a TranslateArgs) (TranslateResult, error) {
	for _, p := range []string{a.From, a.To} {
		if !protocol.ValidProvider(p) {
			return TranslateResult{}, protocol.Errorf(protocol.CodeUnsupportedProvider, "unsupported provider %q (want one of claude, openai, gemini, deepseek)", p)
		}
	}
	out, err := translate.Translate(a.History, a.From, a.To)
	switch {
	case errors.Is(err, translate.ErrUnknownProvider):
		return TranslateResult{}, protocol.Errorf(protocol.CodeUnsupportedProvider, "%v", err)
	case err != nil:
		return TranslateResult{}, protocol.Errorf(protocol.CodeInvalidParams, "translate_history: %v", err)
	}
	return TranslateResult{History: out, From: a.From, To: a.To}, nil
}

// newID returns prefix_ and 16 random hex characters.
func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}
