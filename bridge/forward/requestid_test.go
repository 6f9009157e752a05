package forward_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// TestReusedRequestID (issue 12, acceptance 7): a session that repeats a JSON-RPC request
// id gets the earlier task back only for the same call (tool and arguments) while it has
// not expired; the same id for another tool or other arguments (a TS SDK v1 client whose
// ids restarted at 0) starts a new task, and the earlier task stays the caller's.
func TestReusedRequestID(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	create := func(id int, tool, args, task string) string {
		t.Helper()
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s,"task":%s}}`, id, tool, args, task)
		_, reply := post(t, e.url, c.SessionID(), "", body)
		tid := gjson.Get(sseData(reply), "result.task.taskId").Str
		if tid == "" {
			t.Fatalf("%s\n  answered %s", body, reply)
		}
		return tid
	}
	first := create(0, "slow_compute", `{"seconds":0,"label":"a"}`, `{}`)
	if again := create(0, "slow_compute", `{"seconds":0,"label":"a"}`, `{}`); again != first {
		t.Errorf("the same call with the same id made a new task %s, want %s", again, first)
	}
	other := create(0, "long_job", `{"seconds":600}`, `{}`)
	if other == first {
		t.Fatalf("id 0 reused for another tool got the earlier task %s back", first)
	}
	args := create(0, "long_job", `{"seconds":601}`, `{}`)
	if args == other {
		t.Fatalf("id 0 reused with other arguments got the earlier task %s back", other)
	}
	if again := create(0, "long_job", `{"seconds":601}`, `{}`); again != args {
		t.Errorf("a retry of the newest call with id 0 made %s, want %s", again, args)
	}
	for _, tid := range []string{first, other, args} {
		if s := call(t, c, "tasks/get", id(tid)).Get("taskId").Str; s != tid {
			t.Errorf("task %s no longer reachable by its id", tid)
		}
	}
	if n := len(call(t, c, "tasks/list", map[string]any{}).Get("tasks").Array()); n != 3 {
		t.Errorf("tasks/list shows %d tasks, want 3", n)
	}
	// An expired earlier task is not an answer either.
	short := create(7, "slow_compute", `{"seconds":0}`, `{"ttl":300}`)
	time.Sleep(500 * time.Millisecond)
	if again := create(7, "slow_compute", `{"seconds":0}`, `{"ttl":300}`); again == short {
		t.Errorf("the same call after the earlier task expired got the expired task %s back", short)
	}
	for _, tid := range []string{other, args} {
		call(t, c, "tasks/cancel", id(tid))
	}
}

// sseData returns a reply body's JSON-RPC response: the body itself when it is JSON, else
// the last SSE data line that carries an id.
func sseData(body string) string {
	if len(body) > 0 && body[0] == '{' {
		return body
	}
	var last string
	for _, line := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok && gjson.Get(d, "id").Exists() {
			last = d
		}
	}
	return last
}
