package sep2663

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/child"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// StdioTransport runs the upstream as a child process and speaks newline-delimited
// JSON-RPC on its stdin/stdout (2026-07-28 §Transports/stdio). The process itself — start,
// restart with backoff when it dies, the shutdown sequence (close stdin, wait, SIGTERM,
// wait, SIGKILL), wire ids and routing — is internal/child's Proc, which a legacy client
// may share (a dual-era child); this type adapts it to the Client's Transport. Calls in
// flight when the child dies fail with ErrChildExited (the Client wraps it in
// *upstream.Error), and tasks that lived in the old child are found lost by the next
// tasks/get (-32602), which the bridge reports as an unknown outcome.
//
// Routing: a response goes to the call with its id; a notification that carries
// _meta["io.modelcontextprotocol/subscriptionId"] goes to the call (a subscriptions/listen)
// with that id; other notifications are not this client's; a request from the server
// (2026-07-28 servers send none) is answered -32601. When a call's ctx ends, the child gets
// notifications/cancelled for it: on stdio that is how a listen (or any request) is
// cancelled.
//
// Concurrency: safe for concurrent use; the Proc owns every goroutine.
type StdioTransport struct {
	p    *child.Proc
	owns bool // Close shuts the process down (StartStdio); false over a shared Proc
}

// StdioOptions configure a StdioTransport. Command is required.
type StdioOptions struct {
	Command []string // argv: program and arguments (see SplitCommand)
	Env     []string // added to the bridge's environment, "KEY=value"
	Dir     string   // working directory; "" is the bridge's
	// Stderr receives the child's stderr (default os.Stderr: with "taskbridge stdio" that is
	// the log stream, never the protocol stream).
	Stderr io.Writer
	Logger *zerolog.Logger

	// CloseWait is how long Close waits for the child to exit after closing its stdin,
	// TermWait how long after SIGTERM before SIGKILL. Defaults 5 s and 5 s.
	CloseWait, TermWait time.Duration
	// RestartMin and RestartMax bound the restart backoff (doubling with jitter; reset when
	// a child lived longer than RestartMax). Defaults 200 ms and 30 s.
	RestartMin, RestartMax time.Duration
	// MaxLineBytes caps one line from the child (default 64 MiB, as maxBody).
	MaxLineBytes int
}

// ErrChildExited fails calls that were in flight when the child process ended.
var ErrChildExited = child.ErrExited

// ErrTransportClosed fails calls after Close.
var ErrTransportClosed = child.ErrClosed

// SplitCommand splits "CMD ARGS" on spaces and tabs, keeping 'single' or "double" quoted
// parts together (no escapes, no variables: it is not a shell).
func SplitCommand(s string) ([]string, error) { return child.SplitCommand(s) }

// StartStdio starts the child process and the supervisor that restarts it. It fails only
// when the first start fails (the program cannot be run).
func StartStdio(o StdioOptions) (*StdioTransport, error) {
	if o.MaxLineBytes <= 0 {
		o.MaxLineBytes = maxBody
	}
	p, err := child.Start(child.Options{Command: o.Command, Env: o.Env, Dir: o.Dir, Stderr: o.Stderr,
		Logger: o.Logger, CloseWait: o.CloseWait, TermWait: o.TermWait, RestartMin: o.RestartMin,
		RestartMax: o.RestartMax, MaxLineBytes: o.MaxLineBytes})
	if err != nil {
		return nil, err
	}
	return &StdioTransport{p: p, owns: true}, nil
}

// StdioOver is a StdioTransport over a child process that another client shares (a
// dual-era child): Close leaves the process to its owner.
func StdioOver(p *child.Proc) *StdioTransport { return &StdioTransport{p: p} }

// Name implements Transport.
func (t *StdioTransport) Name() string { return t.p.Name() }

// PID is the process id of the running child, 0 while it is being restarted.
func (t *StdioTransport) PID() int { return t.p.PID() }

// Starts counts the child processes started so far (1 before any restart).
func (t *StdioTransport) Starts() int { return t.p.Starts() }

// Close stops restarting and shuts the child down (when this transport started it); it
// returns when the child has exited or ctx ended. Safe to call more than once.
func (t *StdioTransport) Close(ctx context.Context) error {
	if !t.owns {
		return nil
	}
	return t.p.Close(ctx)
}

// RoundTrip implements Transport. The Proc sends the request under its own wire id (the
// id in body is this client's numbering, which a shared pipe cannot use); method and
// params go out byte for byte.
func (t *StdioTransport) RoundTrip(ctx context.Context, id jsonrpc.ID, body []byte, onMessage func(*jsonrpc.Message)) (json.RawMessage, *jsonrpc.Error, error) {
	method := gjson.GetBytes(body, "method").Str
	params := json.RawMessage(gjson.GetBytes(body, "params").Raw)
	res, _, err := t.p.Call(ctx, method, params, child.CallOptions{OnMessage: func(m *jsonrpc.Message) {
		switch {
		case m.IsRequest():
			_ = t.p.Reply(context.Background(), jsonrpc.NewErrorResponse(m.ID,
				jsonrpc.ErrMethodNotFound.Wrapf("a 2026-07-28 server sends no requests: %s", m.Method)))
		case onMessage != nil && gjson.GetBytes(m.Params, `_meta.io\.modelcontextprotocol/subscriptionId`).Exists():
			onMessage(m)
		}
	}})
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		return nil, rpcErr, nil
	}
	return res, nil, err
}

// Send implements Transport.
func (t *StdioTransport) Send(ctx context.Context, body []byte) error {
	return t.p.Notify(ctx, gjson.GetBytes(body, "method").Str, json.RawMessage(gjson.GetBytes(body, "params").Raw))
}
