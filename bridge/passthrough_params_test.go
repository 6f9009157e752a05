package bridge_test

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// headerRecorder keeps the headers of the last request it passed on to the fixture.
type headerRecorder struct {
	next http.Handler
	mu   sync.Mutex
	last http.Header
}

func (h *headerRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.last = r.Header.Clone()
	h.mu.Unlock()
	h.next.ServeHTTP(w, r)
}

func (h *headerRecorder) lastHeader() http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

// TestModernPassThroughForwardsParamHeaders (issue 16 item 1, acceptance 3): a 2026-07-28
// client calls the fixture's region_lookup through the modern pass-through with its own
// Mcp-Param-Region header; the bridge forwards every Mcp-Param-* header as sent (one the
// upstream does not know too, values byte for byte), so the call succeeds (a task, polled to its result); the client's Authorization and other headers never reach the upstream. Without its
// header the client gets the upstream's -32020 unchanged (it is a 2026-07-28 client).
func TestModernPassThroughForwardsParamHeaders(t *testing.T) {
	fx := fixture.New(fixture.Options{Scale: 0.1, PollIntervalMs: 100})
	rec := &headerRecorder{next: fx}
	up := httptest.NewServer(rec)
	t.Cleanup(func() { up.Close(); fx.Close() })
	cfg := envConfig{Config: forward.Config{Logger: zerolog.Nop()}}
	withAuth(t)(&cfg, nil)
	e := &env{t: t, fx: fx, upURL: up.URL + "/mcp", dbPath: filepath.Join(t.TempDir(), "tb.db")}
	e.start(cfg)

	extra := http.Header{
		"Mcp-Param-Region":  {"=?base64?WsO8cmljaA==?="},
		"Mcp-Param-Unknown": {`Kept  As-Sent; x=1, "q"`},
		"X-Client-Secret":   {"s3cret"},
		"Cookie":            {"session=abc"},
	}
	status, msg := modernPostH(t, e.url, aliceKey, "tools/call", `{"name":"region_lookup","arguments":{"region":"Zürich","query":"q"}}`, extra)
	if status != http.StatusOK || gjson.Get(msg, "result.resultType").Str != "task" {
		t.Fatalf("call: HTTP %d %s, want a task", status, msg)
	}
	h := rec.lastHeader()
	if got := h.Values("Mcp-Param-Region"); len(got) != 1 || got[0] != "=?base64?WsO8cmljaA==?=" {
		t.Errorf("upstream Mcp-Param-Region = %q", got)
	}
	if got := h.Values("Mcp-Param-Unknown"); len(got) != 1 || got[0] != `Kept  As-Sent; x=1, "q"` {
		t.Errorf("upstream Mcp-Param-Unknown = %q, want it byte for byte", got)
	}
	for _, k := range []string{"Authorization", "X-Client-Secret", "Cookie"} {
		if v := h.Get(k); v != "" {
			t.Errorf("the client's %s reached the upstream: %q", k, v)
		}
	}

	tid := gjson.Get(msg, "result.taskId").Str
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, got := modernPost(t, e.url, aliceKey, "tasks/get", `{"taskId":"`+tid+`"}`)
		if gjson.Get(got, "result.status").Str == "completed" {
			if txt := gjson.Get(got, "result.result.content.0.text").Str; txt != `Lookup of "q" in Zürich done.` {
				t.Errorf("task result = %s", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task never completed: %s", got)
		}
		time.Sleep(50 * time.Millisecond)
	}

	status, msg = modernPost(t, e.url, aliceKey, "tools/call", `{"name":"region_lookup","arguments":{"region":"eu"}}`)
	if status != http.StatusBadRequest || gjson.Get(msg, "error.code").Int() != jsonrpc.CodeHeaderMismatch {
		t.Errorf("without the header: HTTP %d %s, want 400 and the upstream's -32020", status, msg)
	}
}
