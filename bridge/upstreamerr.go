package bridge

import (
	"context"
	"errors"
	"net"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/upstream"
	"github.com/taskbridge/taskbridge/sep2663"
)

// The classes of upstream failure a client is told. A client never learns the upstream's
// address, its credentials or a dial error: those stay in the log (debug level, redacted).
const (
	msgUpstreamUnavailable = "upstream unavailable"
	msgUpstreamTimeout     = "upstream timed out"
	msgUpstreamInvalid     = "invalid upstream reply"
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

// upstreamClass names the class of a transport-level upstream failure.
func upstreamClass(err error) string {
	var ne net.Error
	var ue *upstream.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return msgUpstreamTimeout
	case errors.As(err, &ue) && ue.Timeout():
		return msgUpstreamTimeout
	case errors.Is(err, sep2663.ErrInvalidReply):
		return msgUpstreamInvalid
	}
	return msgUpstreamUnavailable
}

// classified wraps err as CodeUpstream with its class as the whole message.
func classified(err error) error {
	return &upstreamFault{wire: jsonrpc.NewError(jsonrpc.CodeUpstream, upstreamClass(err)), cause: err}
}

// upstreamErr maps a failure of the SEP-2663 upstream to the wire: JSON-RPC errors from
// the upstream pass through; transport failures become CodeUpstream with only their class.
// nil stays nil.
func upstreamErr(err error) error {
	var je *jsonrpc.Error
	var ue *upstream.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &je):
		return je
	case errors.As(err, &ue), errors.Is(err, context.DeadlineExceeded):
		return classified(err)
	}
	return err
}

// reverseUpstreamErr maps a failure of the 2025-11-25 upstream to the modern wire:
// JSON-RPC errors pass through (the retired -32002 "resource not found" becomes -32602);
// transport failures become CodeUpstream with only their class.
func reverseUpstreamErr(err error) error {
	var je *jsonrpc.Error
	var ue *upstream.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &je):
		if je.Code == -32002 {
			c := *je
			c.Code = jsonrpc.CodeInvalidParams
			return &c
		}
		return je
	case errors.As(err, &ue), errors.Is(err, context.DeadlineExceeded):
		return classified(err)
	}
	return err
}

// upstreamCause returns the cause kept in an upstream fault (nil for other errors), for
// the debug log line of the request.
func upstreamCause(err error) error {
	var f *upstreamFault
	if errors.As(err, &f) {
		return f.cause
	}
	return nil
}
