package jsonrpc

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Standard JSON-RPC codes and the codes MCP 2026-07-28 reserves.
const (
	CodeParseError         = -32700
	CodeInvalidRequest     = -32600
	CodeMethodNotFound     = -32601
	CodeInvalidParams      = -32602
	CodeInternalError      = -32603
	CodeHeaderMismatch     = -32020 // 2026-07-28: header/body mismatch (HTTP 400)
	CodeMissingCapability  = -32021 // 2026-07-28: missing required client capability (HTTP 400)
	CodeUnsupportedVersion = -32022 // 2026-07-28: unsupported protocol version (HTTP 400)
	// CodeUpstream is taskbridge's own code (the implementation range -32000..-32019) for
	// "the upstream server could not be reached or answered nonsense".
	CodeUpstream = -32001
	// CodeOverloaded is taskbridge's code for "too many in-flight calls, retry later".
	CodeOverloaded = -32002
)

// Error is a JSON-RPC error object. It is also a Go error, so coded errors travel through
// ordinary error returns and are mapped to the wire in one place (AsError).
type Error struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// NewError returns a coded error value.
func NewError(code int64, msg string) *Error { return &Error{Code: code, Message: msg} }

// Error implements error.
func (e *Error) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

// Is makes errors.Is match on the code and message of sentinel values.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Message == e.Message
}

// Wrapf returns a copy of e whose message gains ": detail".
func (e *Error) Wrapf(format string, args ...any) *Error {
	c := *e
	c.Message = e.Message + ": " + fmt.Sprintf(format, args...)
	return &c
}

// WithData returns a copy of e carrying data (encoded as JSON).
func (e *Error) WithData(data any) *Error {
	c := *e
	if b, err := json.Marshal(data); err == nil {
		c.Data = b
	}
	return &c
}

// Sentinel errors. Compare with errors.Is only where the message is fixed.
var (
	ErrParse          = NewError(CodeParseError, "Parse error")
	ErrInvalidRequest = NewError(CodeInvalidRequest, "Invalid Request")
	ErrMethodNotFound = NewError(CodeMethodNotFound, "Method not found")
	ErrInvalidParams  = NewError(CodeInvalidParams, "Invalid params")
	ErrInternal       = NewError(CodeInternalError, "Internal error")
)

// AsError maps any error to a wire error: a *Error anywhere in the chain is returned as is;
// anything else becomes -32603 with a generic message (internal details are not leaked).
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return ErrInternal
}
