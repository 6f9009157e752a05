package jsonrpc

import (
	"encoding/json"
	"errors"
	"fmt"
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

// Is makes errors.Is match by code: errors.Is(err, ErrOverloaded) holds for every error
// with that code, whatever its message and data. Clients tell errors apart by code and
// data.reason, never by message, and so does taskbridge.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
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

// Sentinel errors of the standard codes (errors.Is matches by code).
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
