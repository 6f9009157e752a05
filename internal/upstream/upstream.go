// Package upstream holds the one error type of a failed upstream call, shared by both
// faces' clients (sep2663.Client towards a 2026-07-28 server, legacy.Client towards a
// 2025-11-25 one), so the routes classify every transport failure the same way: timed out,
// never sent (the tool cannot have run), or anything else (its fate is unknown).
package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/taskbridge/taskbridge/internal/redact"
)

// ErrInvalidReply is wrapped by every error about an upstream reply that breaks the
// protocol (a body that is not JSON-RPC, a bad initialize result, an unknown resultType),
// from either era's client, so a client is told "invalid upstream reply", not
// "unavailable" (bridge/internal/errmap).
var ErrInvalidReply = errors.New("invalid upstream reply")

// Error is a failure to get a JSON-RPC answer from an upstream: a transport error, an HTTP
// status without a JSON-RPC body, or a reply that breaks the protocol. A JSON-RPC error the
// upstream sent is never an Error: it travels as *jsonrpc.Error.
type Error struct {
	Legacy bool   // the upstream is a 2025-11-25 server (legacy.Client); for the log line
	URL    string // redacted: no credentials
	Method string
	Status int // the HTTP status, 0 when no response arrived
	Err    error
}

// Error names the upstream URL (redacted) and the method, e.g.
// "upstream http://x/mcp: tools/call: connection refused". It is for logs: clients are
// told only the class of the failure (bridge/internal/errmap).
func (e *Error) Error() string {
	who := "upstream"
	if e.Legacy {
		who = "legacy upstream"
	}
	if e.Status != 0 && e.Status/100 != 2 {
		return fmt.Sprintf("%s %s: %s: HTTP %d: %s", who, e.URL, e.Method, e.Status, redact.Error(e.Err))
	}
	return fmt.Sprintf("%s %s: %s: %s", who, e.URL, e.Method, redact.Error(e.Err))
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Timeout reports whether the failure was a timeout (a deadline or a network timeout).
func (e *Error) Timeout() bool {
	if errors.Is(e.Err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(e.Err, &ne) && ne.Timeout()
}

// NeverSent reports whether the request certainly never reached the upstream: the
// connection was refused. Then the call did not run and a retry is safe; after any other
// failure the request may have arrived.
func (e *Error) NeverSent() bool { return NeverSent(e.Err) }

// NeverSent reports whether err (an *Error or its cause) is a refused connection.
func NeverSent(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
