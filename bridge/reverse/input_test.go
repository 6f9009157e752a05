package reverse

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"
)

// TestAnswerCarriesRelatedTask pins issue 16 item 13: the answer the bridge POSTs to a legacy
// upstream's task-related request (one sent on the task's tasks/result stream) carries the
// related-task _meta of the upstream's task, as 2025-11-25 requires of every response
// associated with a task; a related-task the client put there is replaced, other _meta kept.
func TestAnswerCarriesRelatedTask(t *testing.T) {
	got := withRelatedTask(json.RawMessage(`{"action":"accept","content":{"ok":true},"_meta":{"k":1,"io.modelcontextprotocol/related-task":{"taskId":"forged"}}}`), "up-7")
	if rt := gjson.GetBytes(got, `_meta.io\.modelcontextprotocol/related-task.taskId`).Str; rt != "up-7" {
		t.Errorf("answer %s: related-task %q, want up-7", got, rt)
	}
	if gjson.GetBytes(got, "action").Str != "accept" || gjson.GetBytes(got, "_meta.k").Int() != 1 {
		t.Errorf("answer %s lost its content", got)
	}
	if got := withRelatedTask(json.RawMessage(`{"action":"decline"}`), ""); string(got) != `{"action":"decline"}` {
		t.Errorf("without an upstream task: %s", got)
	}
}
