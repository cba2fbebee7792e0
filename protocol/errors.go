package protocol

import (
	"errors"
	"fmt"
)

// JSON-RPC and mcpv2 error codes (SPEC §2).
const (
	CodeParseError          = -32700 // the bytes are not JSON
	CodeInvalidRequest      = -32600 // not a valid slot or batch
	CodeMethodNotFound      = -32601 // unknown method
	CodeInvalidParams       = -32602 // arguments do not match the skill's schema
	CodeInternal            = -32603 // a bug or an unexpected failure on the server
	CodeInvalidSession      = -32001 // invalid session / not authenticated
	CodeSkillNotFound       = -32002 // no skill of that name
	CodeSkillExecution      = -32003 // the skill ran and failed
	CodeToolExecution       = -32004 // a tool the skill relies on failed
	CodeRateLimited         = -32005 // too many requests
	CodeVersionMismatch     = -32006 // no common protocol version
	CodeFileNotFound        = -32007 // the named file does not exist
	CodePaymentFailed       = -32008 // payment failed
	CodeNotPermitted        = -32009 // capability violation: the caller is not granted this
	CodeUnsupportedProvider = -32010 // context.provider or a provider name is not known
)

// Error is the one error type of the mcpv2 protocol: a JSON-RPC error object.
// Data, when set, must never carry stack traces, secrets or host paths.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// Error implements the error interface.
func (e *Error) Error() string {
	return fmt.Sprintf("mcpv2 error %d: %s", e.Code, e.Message)
}

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsError returns err as an *Error. An error that is not (and does not wrap)
// an *Error becomes CodeInternal with a generic message, so that internal
// details never reach a remote peer; nil stays nil.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	return &Error{Code: CodeInternal, Message: "internal error"}
}

// ErrNoDiscovery is returned by a node's Find when it runs without the DHT;
// the edge answers it with HTTP 501.
var ErrNoDiscovery = errors.New("discovery is not enabled on this node")
