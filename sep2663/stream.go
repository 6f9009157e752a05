package sep2663

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/taskbridge/taskbridge/internal/upstream"
	"io"
	"mime"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/sse"
)

// maxBody caps a JSON reply body and each SSE event (64 MiB), so a broken or hostile
// upstream cannot exhaust memory. A long SSE stream may carry more in total: only one event
// is held at once. It is a variable only so tests can lower it.
var maxBody = 64 << 20

// ErrInvalidReply is wrapped by every error about a reply that is not valid 2026-07-28
// JSON-RPC (unknown resultType, missing taskId, a body that is not JSON-RPC, …).
// It is upstream.ErrInvalidReply, the one value both eras' clients wrap.
var ErrInvalidReply = upstream.ErrInvalidReply

// ErrTaskMismatch is the invalid reply of a tasks/get answered with another task's taskId.
var ErrTaskMismatch = fmt.Errorf("%w: tasks/get answer is about another task", ErrInvalidReply)

// errTooLarge reports a body or SSE event above maxBody.
var errTooLarge = fmt.Errorf("%w: body or event larger than the size cap", ErrInvalidReply)

// readResponse reads the reply to the request with id: a JSON body or, for a 2xx
// text/event-stream, an SSE stream whose notifications go to onMessage (may be nil). It
// returns the result, or the JSON-RPC error the server sent (rpcErr), or err for anything
// else (I/O failures, bodies that are not JSON-RPC, a stream without the response). err never
// holds a *jsonrpc.Error, so the caller can wrap it as an upstream.Error.
func readResponse(contentType string, status int, body io.Reader, id jsonrpc.ID,
	onMessage func(*jsonrpc.Message)) (result json.RawMessage, rpcErr *jsonrpc.Error, err error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "text/event-stream" && status/100 == 2 {
		return readStream(body, id, onMessage)
	}
	b, err := readCapped(body, int64(maxBody))
	if err != nil {
		return nil, nil, err
	}
	return decodeReply(b, status, id)
}

// readCapped reads all of r, failing beyond limit bytes.
func readCapped(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errTooLarge
	}
	return b, nil
}

// decodeReply interprets a whole JSON body received with the HTTP status.
func decodeReply(b []byte, status int, id jsonrpc.ID) (json.RawMessage, *jsonrpc.Error, error) {
	ok2xx := status/100 == 2
	if len(bytes.TrimSpace(b)) == 0 {
		if ok2xx {
			return nil, nil, fmt.Errorf("%w: empty body", ErrInvalidReply)
		}
		return nil, nil, errors.New("no JSON-RPC body")
	}
	m, err := jsonrpc.Decode(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: body is not JSON-RPC: %s", ErrInvalidReply, jsonrpc.AsError(err).Message)
	}
	if !m.IsResponse() {
		return nil, nil, fmt.Errorf("%w: expected a response, got %q", ErrInvalidReply, m.Method)
	}
	if m.Error != nil && (sameID(m.ID, id) || m.ID.IsNull()) {
		return nil, m.Error, nil
	}
	if !sameID(m.ID, id) {
		return nil, nil, fmt.Errorf("%w: response id %s, want %s", ErrInvalidReply, m.ID.Raw(), id.Raw())
	}
	if !ok2xx {
		return nil, nil, fmt.Errorf("%w: result with a non-2xx status", ErrInvalidReply)
	}
	return m.Result, nil, nil
}

// sameID compares ids by value, so 7 and "7" match (some servers echo numbers as strings).
func sameID(a, b jsonrpc.ID) bool { return a.Raw() == b.Raw() || a.String() == b.String() }

// readStream reads SSE events (internal/sse) until the response to id arrives. Comment
// lines are keep-alives; events whose type is not "message" and empty events are skipped;
// requests from the server (forbidden in 2026-07-28) and responses to other ids are ignored.
func readStream(body io.Reader, id jsonrpc.ID, onMessage func(*jsonrpc.Message)) (json.RawMessage, *jsonrpc.Error, error) {
	rd := sse.NewReader(body, maxBody)
	for {
		ev, err := rd.Next()
		switch {
		case errors.Is(err, io.EOF):
			return nil, nil, errors.New("stream ended before the response")
		case errors.Is(err, sse.ErrTooLarge):
			return nil, nil, errTooLarge
		case err != nil:
			return nil, nil, err
		}
		if res, rpcErr, done, derr := dispatch(ev, id, onMessage); done || derr != nil {
			return res, rpcErr, derr
		}
	}
}

// dispatch handles one event. done is true when the response to id was found (res or
// rpcErr is set).
func dispatch(ev sse.Event, id jsonrpc.ID, onMessage func(*jsonrpc.Message)) (res json.RawMessage, rpcErr *jsonrpc.Error, done bool, err error) {
	if !ev.HasData || !ev.IsMessage() || len(bytes.TrimSpace(ev.Data)) == 0 {
		return nil, nil, false, nil
	}
	m, derr := jsonrpc.Decode(ev.Data)
	if derr != nil {
		return nil, nil, false, fmt.Errorf("%w: SSE event is not JSON-RPC: %s", ErrInvalidReply, jsonrpc.AsError(derr).Message)
	}
	switch {
	case m.IsNotification():
		if onMessage != nil {
			onMessage(m)
		}
	case m.IsResponse() && m.Error != nil && (sameID(m.ID, id) || m.ID.IsNull()):
		return nil, m.Error, true, nil
	case m.IsResponse() && sameID(m.ID, id):
		return m.Result, nil, true, nil
	}
	return nil, nil, false, nil
}
