// Acceptance 2 of issue 4 (first half): the real TS SDK v1 client (legacy-client.mjs)
// through the bridge in front of a 2026-07-28 upstream *without* the tasks extension. A
// task-augmented call to a read-only tool completes as a bridge-hosted task; one to a
// non-eligible tool gets the refusal error at once, without reaching the upstream.
//
// The second half (a legacy TS SDK v1 task server behind the bridge, the full task flow
// passing unchanged) belongs to the reverse/pass-through route and is not tested here.
package interop

import (
	"strings"
	"testing"
	"time"

	"github.com/taskbridge/taskbridge/internal/fixture"
)

// fallbackCodeTaskUnavailable is jsonrpc.CodeTaskUnavailable, spelled out: the wire value
// is what clients see.
const fallbackCodeTaskUnavailable = -32014

// newNoTasksEnv is the bridge in front of the fixture without the tasks extension.
func newNoTasksEnv(t *testing.T) *env {
	return newEnvWith(t, fixture.Options{Name: "interop-no-tasks", Scale: 0.2, NoTasksExtension: true})
}

func TestLegacyClientHostedTasks(t *testing.T) {
	e := newNoTasksEnv(t)

	t.Run("tools", func(t *testing.T) {
		o := e.run(t, "tools")
		o.checkOK(t)
		for tool, want := range map[string]string{"slow_compute": "optional", "greet": "optional", "confirm_delete": "forbidden", "protocol_error_job": "forbidden"} {
			if got := o.str("taskSupport", tool); got != want {
				t.Errorf("%s: taskSupport %q, want %q", tool, got, want)
			}
		}
	})
	t.Run("poll", func(t *testing.T) {
		o := e.run(t, "poll", "--tool", "slow_compute", "--args", `{"seconds":1,"label":"hosted"}`)
		o.checkOK(t)
		if !strings.Contains(o.text("result"), "Result: 42") {
			t.Errorf("result text %q", o.text("result"))
		}
		if !bridgeTaskID.MatchString(o.str("taskId")) {
			t.Errorf("task id %q is not a bridge id", o.str("taskId"))
		}
	})
	t.Run("stream", func(t *testing.T) {
		o := e.run(t, "stream", "--tool", "greet", "--args", `{"name":"hosted"}`)
		o.checkOK(t)
		if got := o.text("result"); got != "Hello, hosted!" {
			t.Errorf("result text %q", got)
		}
	})
	t.Run("list", func(t *testing.T) {
		o := e.run(t, "list", "--tool", "slow_compute", "--args", `{"seconds":1}`)
		o.checkOK(t)
	})
	t.Run("cancel", func(t *testing.T) {
		o := e.run(t, "cancel", "--tool", "slow_compute", "--args", `{"seconds":30}`)
		o.checkOK(t)
	})
	for _, tool := range []struct{ name, args string }{
		{"confirm_delete", `{"filename":"a.txt"}`},
		{"protocol_error_job", `{"seconds":1}`},
	} {
		t.Run("refuse-"+tool.name, func(t *testing.T) {
			before := e.fx.Stats().Methods["tools/call"]
			start := time.Now()
			o := e.run(t, "poll", "--tool", tool.name, "--args", tool.args)
			took := time.Since(start)
			if got := o.code("unexpectedError"); got != fallbackCodeTaskUnavailable {
				t.Fatalf("error code %d, want %d (%s)", got, fallbackCodeTaskUnavailable, o.raw)
			}
			msg := o.str("unexpectedError", "message")
			for _, s := range []string{"io.modelcontextprotocol/tasks", "without params.task"} {
				if !strings.Contains(msg, s) {
					t.Errorf("refusal %q does not mention %q", msg, s)
				}
			}
			if after := e.fx.Stats().Methods["tools/call"]; after != before {
				t.Errorf("the refused call reached the upstream")
			}
			// The whole Node run (process start included) ends far below a hang: a
			// refusal is immediate, never a long request.
			if took > 15*time.Second {
				t.Errorf("the refusal took %s", took)
			}
		})
	}
}
