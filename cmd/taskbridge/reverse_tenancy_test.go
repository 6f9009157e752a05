package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
	"github.com/taskbridge/taskbridge/internal/testenv"
)

// TestReverseTenancy is issue 14's acceptance 3 on the reverse route, through "taskbridge
// serve" with API keys in front of the TS SDK v1 legacy server: a task is bound to the
// principal that created it; another principal's tasks/get, tasks/update and tasks/cancel
// answer with exactly the bytes (HTTP status and JSON-RPC error) of an unknown id and
// change nothing; max_concurrent_tasks counts each principal's unfinished tasks from the
// store.
func TestReverseTenancy(t *testing.T) {
	bin := buildTaskbridge(t, t.TempDir())
	up := testenv.StartNodeServer(t, "legacy-server.mjs", "--port", "0")
	const alice, bob = "alice-key-0123456789abcdef", "bob-key-0123456789abcdefgh"
	b := serveChild(t, bin, up, "sqlite:"+filepath.Join(t.TempDir(), "b.db"), "tenancy",
		"--auth", `{"api_keys":[{"key":"`+alice+`","principal":"alice"},{"key":"`+bob+`","principal":"bob"}]}`,
		"--max-concurrent-tasks", "1")
	as := []string{"Authorization", "Bearer " + alice}
	bs := []string{"Authorization", "Bearer " + bob}

	if resp, _ := rawModernHTTP(t, b.url, "tools/call", `{"name":"slow_compute","arguments":{"seconds":30}}`); resp.StatusCode != 401 {
		t.Errorf("tools/call without a key: HTTP %d, want 401", resp.StatusCode)
	}
	r := rawModern(t, b.url, "tools/call", `{"name":"slow_compute","arguments":{"seconds":30}}`, as...)
	id := r.Get("result.taskId").Str
	if r.Get("result.resultType").Str != "task" || id == "" {
		t.Fatalf("alice's tools/call: %s", r.Raw)
	}
	// The cap counts alice's unfinished task; bob has none.
	if r := rawModern(t, b.url, "tools/call", `{"name":"slow_compute","arguments":{"seconds":30}}`, as...); !r.Get("error").Exists() {
		t.Errorf("alice's second task at max_concurrent_tasks 1: %s, want a refusal", r.Raw)
	}
	bobs := rawModern(t, b.url, "tools/call", `{"name":"slow_compute","arguments":{"seconds":30}}`, bs...)
	if bobs.Get("result.resultType").Str != "task" {
		t.Errorf("bob's first task: %s", bobs.Raw)
	}

	const unknown = "0123456789abcdef0123456789abcdef"
	for _, c := range []struct{ method, params string }{
		{"tasks/get", `{"taskId":"%s"}`},
		{"tasks/update", `{"taskId":"%s","inputResponses":{"in-1":{"action":"accept"}}}`},
		{"tasks/cancel", `{"taskId":"%s"}`},
	} {
		fr, foreign := rawModernHTTP(t, b.url, c.method, strings.Replace(c.params, "%s", id, 1), bs...)
		ur, unk := rawModernHTTP(t, b.url, c.method, strings.Replace(c.params, "%s", unknown, 1), bs...)
		fe, ue := gjson.Get(foreign, "error").Raw, gjson.Get(unk, "error").Raw
		if fr.StatusCode != ur.StatusCode || fe == "" || fe != ue {
			t.Errorf("%s: foreign id answered HTTP %d %s, unknown id HTTP %d %s (want the same bytes)", c.method, fr.StatusCode, fe, ur.StatusCode, ue)
		}
	}
	// Bob's cancel changed nothing: alice's task still works, and alice can cancel it.
	if g := rawModern(t, b.url, "tasks/get", `{"taskId":"`+id+`"}`, as...); g.Get("result.status").Str != "working" {
		t.Errorf("alice's task after bob's attempts: %s", g.Raw)
	}
	if c := rawModern(t, b.url, "tasks/cancel", `{"taskId":"`+id+`"}`, as...); c.Get("error").Exists() {
		t.Errorf("alice's cancel: %s", c.Raw)
	}
	if stats := legacyStats(t, up); stats["slow_compute"] != 2 {
		t.Errorf("the legacy server ran %v, want slow_compute 2 (the refused call never left)", stats)
	}
}

// TestReverseSunset: with the sunset in the past, new tasks are refused on both routes in
// front of a legacy upstream (the reverse route's 2026-07-28 clients and the pass-through's
// 2025-11-25 clients) with the same error code and data, before anything goes upstream;
// synchronous calls still work.
func TestReverseSunset(t *testing.T) {
	bin := buildTaskbridge(t, t.TempDir())
	up := testenv.StartNodeServer(t, "legacy-server.mjs", "--port", "0")
	b := serveChild(t, bin, up, "sqlite:"+filepath.Join(t.TempDir(), "b.db"), "sunset", "--sunset", "2020-01-01")

	modern := rawModern(t, b.url, "tools/call", `{"name":"slow_compute","arguments":{"seconds":1}}`)
	lc := legacyclient.New(b.url)
	ctx := context.Background()
	if _, err := lc.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := lc.Call(ctx, "tools/call", json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":1},"task":{}}`))
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		t.Fatalf("legacy task after the sunset: %v, want a refusal", err)
	}
	me := modern.Get("error")
	if me.Get("code").Int() != int64(je.Code) || me.Get("data").Raw == "" || !gjsonEqual(me.Get("data").Raw, string(je.Data)) ||
		me.Get("data.reason").Str != "sunset" {
		t.Errorf("sunset refusals differ: reverse %s, pass-through %d %s", me.Raw, je.Code, je.Data)
	}
	if g := rawModern(t, b.url, "tools/call", `{"name":"greet","arguments":{"name":"x"}}`); g.Get("result.content.0.text").Str != "Hello, x!" {
		t.Errorf("synchronous call after the sunset: %s", g.Raw)
	}
	if stats := legacyStats(t, up); stats["slow_compute"] != 0 {
		t.Errorf("the legacy server ran %v after the sunset", stats)
	}
}

// gjsonEqual compares two JSON texts by value.
func gjsonEqual(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}
