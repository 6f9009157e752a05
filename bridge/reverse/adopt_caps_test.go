package reverse

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store/sqlite"
)

// TestAdoptedSessionChecksRecordedCapabilities pins issue 16 item 6 (1, restart): the
// capability set lives on the task's record, so a process that adopts the task's upstream
// session by its stored id (after a restart, or on another replica: no initialize, so no
// pool key to read it from) still checks the task's input requests against what the
// creator declared. An elicitation for a task whose creator declared only sampling is
// answered upstream with an error, fails the task naming the capability and cancels it
// upstream; a record written before the set was kept ("") is checked as declaring all.
func TestAdoptedSessionChecksRecordedCapabilities(t *testing.T) {
	var mu sync.Mutex
	var posts []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		posts = append(posts, string(b))
		mu.Unlock()
		if id := gjson.GetBytes(b, "id"); id.Exists() && gjson.GetBytes(b, "method").Exists() {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+id.Raw+`,"result":{"taskId":"up-1","status":"cancelled","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":60000}}`)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(up.Close)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r, err := New(Config{Upstream: legacy.NewClient(legacy.ClientOptions{URL: up.URL}), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(ctx) })
	for _, c := range []struct {
		id, caps string
		refused  bool
	}{{"t-sampling", `{"sampling":{}}`, true}, {"t-old", "", false}} {
		now := time.Now().UTC()
		rec := &record.Task{ID: c.id, Owner: "anonymous", Origin: r.up.URL(), Mode: record.ModeReverse, Tool: "confirm_delete",
			UpstreamTaskID: "up-1", UpstreamSessionID: "sess-1", Status: record.StatusWorking, Outcome: record.OutcomePending,
			CreatedAt: now, LastUpdatedAt: now, ClientCaps: c.caps}
		if err := st.CreateTask(ctx, rec); err != nil {
			t.Fatal(err)
		}
		sess := r.sessionFor(rec) // adopted: no initialize
		msg := &jsonrpc.Message{ID: jsonrpc.IntID(41), Method: "elicitation/create",
			Params: json.RawMessage(`{"mode":"form","message":"Delete x?","requestedSchema":{"type":"object"},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"up-1"}}}`)}
		_, herr := r.inputHandler(rec, sess)(ctx, msg)
		if !errors.Is(herr, legacy.ErrNoReply) {
			t.Fatalf("%s: handler: %v", c.id, herr)
		}
		got, _ := st.GetTask(ctx, c.id)
		ins, _ := st.ListInputs(ctx, c.id)
		if !c.refused {
			if got.Status != record.StatusWorking || len(ins) != 1 {
				t.Errorf("%s (no recorded set): %s, %d inputs; want the input recorded", c.id, got.Status, len(ins))
			}
			continue
		}
		if got.Status != record.StatusFailed || !strings.Contains(got.StatusMessage, "client capability elicitation") || len(ins) != 0 ||
			!gjson.GetBytes(got.Error, "data.requiredCapabilities.elicitation").IsObject() {
			t.Errorf("%s: %s %q error %s, %d inputs; want failed naming elicitation, nothing recorded", c.id, got.Status, got.StatusMessage, got.Error, len(ins))
		}
		mu.Lock()
		all := strings.Join(posts, "\n")
		mu.Unlock()
		if !strings.Contains(all, `"id":41,"error":{"code":-32601`) || !strings.Contains(all, `"method":"tasks/cancel"`) {
			t.Errorf("upstream saw %s; want a -32601 answer to request 41 and a tasks/cancel", all)
		}
	}
}
