package reverse

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/mapping"
	"github.com/taskbridge/taskbridge/sep2663"
)

// inputBox collects the server→client requests a legacy upstream sends on a held
// tools/call before its task exists (MRTR) and hands them the answers the modern client
// gives in its retry. It lives in memory with the held call: the upstream's tools/call
// stream does not survive this process either. (A task's input requests are records:
// held.go.)
//
// Keys are the key the server named (mapping.InputKeyHint) the first time it is named in
// the box, else prefix + a counter, so they are stable across polls and never reused for
// the life of the box. A request whose named key the first call already answered
// (presets: inputResponses sent before any question, SEP-2322) is answered at once and
// never shown. Concurrency: mu guards every field but changed, which is a 1-slot signal
// channel written without blocking.
type inputBox struct {
	prefix  string
	now     func() time.Time
	changed chan struct{}

	mu      sync.Mutex
	next    int
	order   []string // keys in arrival order (for stable output)
	pending map[string]*pendingInput
	used    map[string]bool            // every key handed out
	presets map[string]json.RawMessage // answers given before their named request came
}

type pendingInput struct {
	req      sep2663.InputRequest
	answer   chan json.RawMessage // 1 slot; written once
	answered bool
}

func newInputBox(prefix string, now func() time.Time) *inputBox {
	return &inputBox{prefix: prefix, now: now, changed: make(chan struct{}, 1), pending: map[string]*pendingInput{},
		used: map[string]bool{}, presets: map[string]json.RawMessage{}}
}

// preset keeps the object members of a first call's inputResponses for requests that will
// name their key (anything else in it is ignored, SEP-2322: servers SHOULD ignore what they
// do not recognize).
func (b *inputBox) preset(responses json.RawMessage) {
	var m map[string]json.RawMessage
	if json.Unmarshal(responses, &m) != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, v := range m {
		if len(v) > 0 && v[0] == '{' {
			b.presets[k] = v
		}
	}
}

// handler is the legacy.RequestHandler of a held stream: an input request waits (until the
// stream's ctx ends) for its answer; ping is answered at once; anything else is -32601.
func (b *inputBox) handler() legacy.RequestHandler {
	return func(ctx context.Context, m *jsonrpc.Message) (json.RawMessage, error) {
		if m.Method == "ping" {
			return json.RawMessage(`{}`), nil
		}
		if !inputMethods[m.Method] {
			return nil, jsonrpc.ErrMethodNotFound.Wrapf("%s", m.Method)
		}
		if a, ok := b.presetFor(mapping.InputKeyHint(m.Params)); ok {
			return a, nil
		}
		key, p := b.add(mapping.InputKeyHint(m.Params), sep2663.InputRequest{Method: m.Method, Params: mapping.InputParamsForModern(m.Params)})
		select {
		case a := <-p.answer:
			return a, nil
		case <-ctx.Done():
			b.drop(key)
			return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "input request abandoned by the bridge")
		}
	}
}

// presetFor takes the preset answer for a named key (once: the key is then used).
func (b *inputBox) presetFor(hint string) (json.RawMessage, bool) {
	if hint == "" || strings.HasPrefix(hint, b.prefix) {
		return nil, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	a, ok := b.presets[hint]
	if !ok || b.used[hint] {
		return nil, false
	}
	delete(b.presets, hint)
	b.used[hint] = true
	return a, true
}

// add files a request under its named key when that key is free (never used in this box,
// and not of the numbered form), else under the next number.
func (b *inputBox) add(hint string, in sep2663.InputRequest) (string, *pendingInput) {
	b.mu.Lock()
	key := hint
	if key == "" || b.used[key] || strings.HasPrefix(key, b.prefix) {
		b.next++
		key = b.prefix + strconv.Itoa(b.next)
	}
	b.used[key] = true
	p := &pendingInput{req: in, answer: make(chan json.RawMessage, 1)}
	b.pending[key] = p
	b.order = append(b.order, key)
	b.mu.Unlock()
	select {
	case b.changed <- struct{}{}:
	default:
	}
	return key, p
}

func (b *inputBox) drop(key string) {
	b.mu.Lock()
	delete(b.pending, key)
	b.mu.Unlock()
}

// unanswered returns the outstanding requests (nil when there are none).
func (b *inputBox) unanswered() sep2663.InputRequests {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out sep2663.InputRequests
	keep := b.order[:0]
	for _, k := range b.order {
		p, ok := b.pending[k]
		if !ok {
			continue
		}
		keep = append(keep, k)
		if p.answered {
			continue
		}
		if out == nil {
			out = sep2663.InputRequests{}
		}
		out[k] = p.req
	}
	b.order = keep
	return out
}

// answer delivers the answer to key. Unknown, already answered or malformed answers are
// ignored (SEP-2663: servers SHOULD silently ignore them); it reports whether it was used.
func (b *inputBox) answer(key string, v json.RawMessage) bool {
	if len(v) == 0 || v[0] != '{' {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.pending[key]
	if !ok || p.answered {
		return false
	}
	p.answered = true
	p.answer <- v
	delete(b.pending, key)
	return true
}

// answerAll delivers every member of an inputResponses object; it returns how many were used.
func (b *inputBox) answerAll(responses json.RawMessage) (int, error) {
	if len(responses) == 0 || string(responses) == "null" {
		return 0, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(responses, &m); err != nil || m == nil {
		return 0, jsonrpc.ErrInvalidParams.Wrapf("inputResponses must be an object")
	}
	n := 0
	for k, v := range m {
		if b.answer(k, v) {
			n++
		}
	}
	return n, nil
}
