// Package errmap is the routes' one error mapper: how a failed upstream call reaches a
// client (a JSON-RPC error from the upstream passes through; a transport failure becomes
// jsonrpc.CodeUpstream whose whole message is its class, never an address or a dial
// error, with the cause kept for the log), and the error answers every route shares.
package errmap

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/upstream"
)

// The classes of upstream failure a client is told. A client never learns the upstream's
// address, its credentials or a dial error: those stay in the log (debug level, redacted).
const (
	MsgUnavailable = "upstream unavailable"
	MsgTimeout     = "upstream timed out"
	MsgInvalid     = "invalid upstream reply"
)

// upstreamFault is the wire error for an upstream failure with its cause kept for the
// log: errors.As finds the wire error (so jsonrpc.AsError sends only the class), while
// errors.Is still sees the cause (a deadline, a refused connection).
type upstreamFault struct {
	wire  *jsonrpc.Error
	cause error
}

func (f *upstreamFault) Error() string   { return f.wire.Error() }
func (f *upstreamFault) Unwrap() []error { return []error{f.wire, f.cause} }

// Class names the class of a transport-level upstream failure.
func Class(err error) string {
	var ne net.Error
	var ue *upstream.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return MsgTimeout
	case errors.As(err, &ue) && ue.Timeout():
		return MsgTimeout
	case errors.Is(err, upstream.ErrInvalidReply): // sep2663.ErrInvalidReply is the same value
		return MsgInvalid
	}
	return MsgUnavailable
}

// classified wraps err as CodeUpstream with its class as the whole message.
func classified(err error) error {
	return &upstreamFault{wire: jsonrpc.NewError(jsonrpc.CodeUpstream, Class(err)), cause: err}
}

// FromModern maps a failure of a 2026-07-28 (SEP-2663) upstream to the wire of a
// 2026-07-28 client. nil stays nil.
func FromModern(err error) error { return mapUpstream(err, false) }

// FromModernForLegacy maps a failure of a 2026-07-28 upstream to the wire of a 2025-11-25
// client (the forward route). As FromModern, except that -32020 (HeaderMismatch), a code
// of the 2026-07-28 transport that 2025-11-25 does not define and whose fix (the request's
// HTTP headers) is the bridge's, not the client's, becomes -32603 with a message saying
// so; the upstream's message and data follow.
func FromModernForLegacy(err error) error {
	err = mapUpstream(err, false)
	var je *jsonrpc.Error
	if errors.As(err, &je) && je.Code == jsonrpc.CodeHeaderMismatch {
		c := *je
		c.Code = jsonrpc.CodeInternalError
		c.Message = MsgHeaderMismatch
		if je.Message != "" {
			c.Message += ": " + je.Message
		}
		return &c
	}
	return err
}

// MsgHeaderMismatch begins the message of an upstream -32020 renumbered for a 2025-11-25
// client.
const MsgHeaderMismatch = "the upstream rejected the HTTP headers the bridge sent (2026-07-28 error -32020, header mismatch)"

// FromLegacy maps a failure of a 2025-11-25 upstream to the wire; the codes 2026-07-28
// retired and forbids sending are renumbered: -32002 "resource not found" becomes -32602,
// which replaced it; -32042 "URL elicitation required" becomes -32603 with the upstream's
// data (its elicitations, which name the URLs) kept and a message that says what it was.
func FromLegacy(err error) error { return mapUpstream(err, true) }

// The 2025-11-25 codes 2026-07-28 retired.
const (
	codeRetired        = -32002 // resource not found
	codeURLElicitation = -32042 // URL elicitation required
)

// msgURLElicitation prefixes the message of a renumbered -32042.
const msgURLElicitation = "the upstream requires a URL-mode elicitation first (2025-11-25 error -32042); complete it and retry"

// mapUpstream is the one mapping: JSON-RPC errors from the upstream pass through (with the
// retired code renumbered when retire is set); transport failures and deadlines become
// CodeUpstream with only their class; anything else is returned as is.
func mapUpstream(err error, retire bool) error {
	var je *jsonrpc.Error
	var ue *upstream.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &je):
		switch {
		case retire && je.Code == codeRetired:
			c := *je
			c.Code = jsonrpc.CodeInvalidParams
			return &c
		case retire && je.Code == codeURLElicitation:
			c := *je
			c.Code = jsonrpc.CodeInternalError
			c.Message = msgURLElicitation
			if je.Message != "" {
				c.Message += ": " + je.Message
			}
			return &c
		}
		return je
	case errors.As(err, &ue), errors.Is(err, context.DeadlineExceeded):
		return classified(err)
	}
	return err
}

// Cause returns the cause kept in an upstream fault (nil for other errors), for
// the debug log line of the request.
func Cause(err error) error {
	var f *upstreamFault
	if errors.As(err, &f) {
		return f.cause
	}
	return nil
}

// ErrTaskNotFound is the one answer for an unknown, expired or foreign task id, on every
// route: the same bytes in every case, so ids cannot be probed.
var ErrTaskNotFound = jsonrpc.NewError(jsonrpc.CodeInvalidParams, "Failed to retrieve task: Task not found")

// IsNotFound reports whether err is a legacy upstream's -32602 (an unknown task).
func IsNotFound(err error) bool {
	var je *jsonrpc.Error
	return errors.As(err, &je) && je.Code == jsonrpc.CodeInvalidParams
}

// ResultTooLarge is the error a task ends with when its result or error (n bytes) is
// larger than max_result_bytes (limit): the payload is not kept, and the real outcome of
// the operation (it may well have succeeded) is named in data.outcome.
func ResultTooLarge(n, limit int64, outcome string) (msg string, err *jsonrpc.Error) {
	msg = fmt.Sprintf("The result (%d bytes) exceeds the bridge's limit of %d bytes; it was not kept.", n, limit)
	return msg, jsonrpc.NewError(jsonrpc.CodeInternalError, msg).
		WithData(map[string]any{"retryable": false, "outcome": outcome, "limit": "maxResultBytes"})
}
