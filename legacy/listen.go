package legacy

// The session's standalone stream (2025-11-25 §Transports: "Listening for Messages from
// the Server"): a GET on the endpoint with the session id, answered with an SSE stream on
// which the server sends requests and notifications unrelated to any request of the
// client's. Servers that ask the client outside a request's stream (mcp-go sends
// sampling/createMessage and roots/list only there, and a task's elicitation/create too)
// wait forever for a client that never opens it. Over a StdioTransport the equivalent is
// what the child writes outside any call (transport.go).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// ErrNoStandaloneStream: the server offers no standalone GET stream (405).
var ErrNoStandaloneStream = errors.New("legacy upstream: no standalone GET stream")

// ListenOptions say what to do with what the standalone stream carries.
type ListenOptions struct {
	// OnRequest answers server requests (on their own goroutines; the answer is sent back
	// as for a call's). Nil answers -32601 (ping gets {}).
	OnRequest RequestHandler
	// OnNotify receives notifications, in order. It must not block.
	OnNotify func(*jsonrpc.Message)
	// Claims, for a Shared session only, tells whether this listener takes a server
	// request that belongs to no call (the other views of the session may take it
	// instead). Nil takes every one.
	Claims func(*jsonrpc.Message) bool
	// OnOpen is called each time the stream (re)opens.
	OnOpen func()
}

// Listen backoff: a stream that fails or ends is re-opened after 250 ms doubling to 30 s,
// with ±20 % jitter, reset after a stream that stayed open for listenHealthy.
const (
	listenBackoffMin = 250 * time.Millisecond
	listenBackoffMax = 30 * time.Second
	listenHealthy    = time.Minute
)

// Listen holds the session's standalone stream open until ctx ends (it then returns
// ctx.Err()), the session is gone (an error wrapping ErrSessionGone), or the server has
// no such stream (ErrNoStandaloneStream). The caller owns the goroutine running it, and
// ends it before closing the session.
func (s *UpstreamSession) Listen(ctx context.Context, o ListenOptions) error {
	if s.c.tr != nil {
		return s.listenStdio(ctx, o)
	}
	bo := &backoff.ExponentialBackOff{InitialInterval: listenBackoffMin, RandomizationFactor: 0.2,
		Multiplier: 2, MaxInterval: listenBackoffMax}
	bo.Reset()
	for {
		opened := time.Now()
		err := s.getStream(ctx, o)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrSessionGone), errors.Is(err, ErrNoStandaloneStream):
			return err
		}
		if time.Since(opened) > listenHealthy {
			bo.Reset()
		}
		t := time.NewTimer(bo.NextBackOff())
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// getStream opens the GET stream once and reads it until it ends.
func (s *UpstreamSession) getStream(ctx context.Context, o ListenOptions) error {
	if s.Gone() {
		return s.upErr("GET", http.StatusNotFound, ErrSessionGone)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.c.url, nil)
	if err != nil {
		return s.upErr("GET", 0, err)
	}
	s.headers(req.Header)
	req.Header.Del("Content-Type")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := s.c.http.Do(req)
	if err != nil {
		return s.upErr("GET", 0, err)
	}
	defer drain(resp.Body)
	switch ct := strings.ToLower(resp.Header.Get("Content-Type")); {
	case resp.StatusCode == http.StatusNotFound && s.id != "":
		s.gone.Store(true)
		return s.upErr("GET", resp.StatusCode, ErrSessionGone)
	case resp.StatusCode == http.StatusMethodNotAllowed:
		return ErrNoStandaloneStream
	case resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream"):
		return s.upErr("GET", resp.StatusCode, fmt.Errorf("standalone stream refused (Content-Type %q)", ct))
	}
	if o.OnOpen != nil {
		o.OnOpen()
	}
	err = readEvents(resp.Body, int(s.c.max), func(data []byte) bool {
		m, err := jsonrpc.Decode(data)
		switch {
		case err != nil || m.IsResponse(): // the GET stream carries no responses
		case m.IsRequest():
			s.answer(ctx, m, o.OnRequest)
		case o.OnNotify != nil:
			o.OnNotify(m)
		}
		return true
	})
	if err == nil {
		err = errors.New("stream ended")
	}
	return s.upErr("GET", http.StatusOK, err)
}

// listenStdio registers the session's listener with the child's transport until ctx ends
// or the child it belonged to is gone.
func (s *UpstreamSession) listenStdio(ctx context.Context, o ListenOptions) error {
	remove := s.c.tr.listen(ctx, s, o)
	defer remove()
	if o.OnOpen != nil {
		o.OnOpen()
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if s.Gone() {
				return s.upErr("GET", http.StatusNotFound, ErrSessionGone)
			}
		}
	}
}
