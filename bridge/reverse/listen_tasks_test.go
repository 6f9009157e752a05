package reverse_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/internal/auth"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
	"github.com/taskbridge/taskbridge/sep2663"
)

// authedDoor serves r behind a front door with two API keys (principals alice and bob) and
// returns its /mcp URL.
func authedDoor(t *testing.T, r *bridge.Reverse) string {
	t.Helper()
	keys, err := auth.NewAPIKeys([]auth.APIKey{{Key: "alice-key-0123456789", Principal: "alice"}, {Key: "bob-key-0123456789ab", Principal: "bob"}})
	if err != nil {
		t.Fatal(err)
	}
	door, err := bridge.NewDoor(bridge.DoorConfig{Auth: keys, Logger: zerolog.Nop()}, r)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", door)
	hs := httptest.NewServer(mux)
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close() })
	return hs.URL + "/mcp"
}

// openTaskListen opens, as the holder of key, a raw subscriptions/listen for taskIds and
// returns its messages on a channel closed when the stream ends.
func openTaskListen(ctx context.Context, t *testing.T, url, key, id string, taskIDs []string) <-chan gjson.Result {
	t.Helper()
	ids, _ := json.Marshal(taskIDs)
	body := `{"jsonrpc":"2.0","id":` + id + `,"method":"subscriptions/listen","params":{` + tasksMeta + `,"notifications":{"taskIds":` + string(ids) + `}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", sep2663.ProtocolVersion)
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("listen: HTTP %d %s", resp.StatusCode, b)
	}
	out := make(chan gjson.Result, 64)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		_ = legacyclient.ReadEvents(resp.Body, func(data []byte) bool {
			out <- gjson.ParseBytes(data)
			return true
		})
	}()
	return out
}

func bearer(key string) http.Header { return http.Header{"Authorization": {"Bearer " + key}} }

// TestReverseListenTasks (issue 16 item 8, reverse route; SEP-2663 notifications/tasks):
// alice's listen naming her confirm_delete task (plus an unknown id) is acknowledged with her
// task only, then gets notifications/tasks for each state the bridge records — its state at
// the listen, input_required with the elicitation, working after her tasks/update, and the
// final completed one with the result, each with the subscriptionId and the DetailedTask
// tasks/get answers; bob's listen naming the same id is acknowledged with none (identical to
// an unknown id) and hears nothing of it.
func TestReverseListenTasks(t *testing.T) {
	r, _ := newReverse(t)
	url := authedDoor(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	alice := sep2663.NewClient(sep2663.ClientOptions{URL: url, Header: bearer("alice-key-0123456789")})
	meta := sep2663.RequestMeta{ClientCapabilities: json.RawMessage(`{"elicitation":{"form":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}}`)}
	out, err := alice.CallTool(ctx, json.RawMessage(`{"name":"confirm_delete","arguments":{"filename":"a.txt"}}`), meta, nil)
	if err != nil || out.Kind != sep2663.KindTask {
		t.Fatalf("tools/call: %v %+v", err, out)
	}
	id := out.Task.TaskID

	mine := openTaskListen(ctx, t, url, "alice-key-0123456789", `"a-1"`, []string{"no-such-task", id})
	theirs := openTaskListen(ctx, t, url, "bob-key-0123456789ab", `"b-1"`, []string{id})
	for who, s := range map[string]<-chan gjson.Result{"alice": mine, "bob": theirs} {
		ack, ok := next(s, 10*time.Second)
		want := `{"taskIds":["` + id + `"]}`
		if who == "bob" {
			want = `{"taskIds":[]}`
		}
		if !ok || ack.Get("method").Str != sep2663.NotificationAck || ack.Get("params.notifications").Raw != want {
			t.Fatalf("%s: first message %s, want the acknowledgement %s", who, ack.Raw, want)
		}
	}

	var statuses []string
	answered := false
	for done := false; !done; {
		m, ok := next(mine, 20*time.Second)
		if !ok {
			t.Fatalf("alice's listen ended or went quiet after %v", statuses)
		}
		if m.Get("method").Str != sep2663.NotificationTasks || m.Get("params.taskId").Str != id ||
			m.Get(`params._meta.io\.modelcontextprotocol/subscriptionId`).Str != "a-1" {
			t.Fatalf("got %s, want notifications/tasks for %s with subscriptionId a-1", m.Raw, id)
		}
		st := m.Get("params.status").Str
		if len(statuses) == 0 || statuses[len(statuses)-1] != st {
			statuses = append(statuses, st)
		}
		switch st {
		case "input_required":
			reqs := m.Get("params.inputRequests").Map()
			if len(reqs) != 1 || answered {
				break
			}
			for k, in := range reqs {
				if in.Get("params.message").Str != "Delete a.txt?" {
					t.Errorf("input request %s", in.Raw)
				}
				if err := alice.UpdateTask(ctx, id, sep2663.InputResponses{k: json.RawMessage(`{"action":"accept","content":{"confirm":true}}`)}, meta); err != nil {
					t.Fatalf("tasks/update: %v", err)
				}
			}
			answered = true
		case "completed":
			if m.Get("params.result.content.0.text").Str != "Deleted a.txt" {
				t.Errorf("final notification result %s", m.Get("params.result").Raw)
			}
			dt, err := alice.GetTask(ctx, id, meta)
			if err != nil || dt.Status != sep2663.StatusCompleted || string(dt.Result) != m.Get("params.result").Raw {
				t.Errorf("tasks/get %v %+v disagrees with the final notification %s", err, dt, m.Get("params").Raw)
			}
			done = true
		case "failed", "cancelled":
			t.Fatalf("task ended %s: %s", st, m.Raw)
		}
	}
	if got := strings.Join(statuses, ","); got != "working,input_required,working,completed" {
		t.Errorf("statuses %s, want working,input_required,working,completed", got)
	}
	if m, ok := next(mine, 1500*time.Millisecond); ok {
		t.Errorf("alice's listen went on after the final state: %s", m.Raw)
	}
	if m, ok := next(theirs, 100*time.Millisecond); ok {
		t.Errorf("bob's listen heard %s", m.Raw)
	}
}
