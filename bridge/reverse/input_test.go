package reverse

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/sep2663"
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

// TestInputBoxNamedKeys pins the MRTR keys of a held call: a request that names its key
// (mapping.MetaInputKey) is shown under it, without the hint; a name already used, or of
// the numbered form, falls back to the next number; and a first call's inputResponses
// answer a named request at once (never shown), while non-object or unnamed ones are
// ignored.
func TestInputBoxNamedKeys(t *testing.T) {
	b := newInputBox("mrtr-", time.Now)
	b.preset(json.RawMessage(`{"confirm":{"action":"accept","content":{"ok":true}},"bad":12345,"mrtr-1":{"action":"accept"}}`))
	h := b.handler()
	ask := func(hint string) (chan json.RawMessage, context.CancelFunc) {
		params := `{"message":"q"}`
		if hint != "" {
			params = `{"message":"q","_meta":{"dev.taskbridge/inputKey":"` + hint + `"}}`
		}
		ctx, cancel := context.WithCancel(t.Context())
		out := make(chan json.RawMessage, 1)
		go func() {
			res, _ := h(ctx, &jsonrpc.Message{Method: "elicitation/create", Params: json.RawMessage(params)})
			out <- res
		}()
		return out, cancel
	}
	// A preset answer for a named request: answered without being shown.
	pre, cancel := ask("confirm")
	defer cancel()
	if got := <-pre; gjson.GetBytes(got, "content.ok").Bool() != true {
		t.Fatalf("preset answer: %s", got)
	}
	var cancels []context.CancelFunc
	for _, hint := range []string{"user_name", "user_name", "mrtr-7", "", "bad", "has space"} {
		_, c := ask(hint)
		cancels = append(cancels, c)
		waitFor(t, func() bool { return len(b.unanswered()) == len(cancels) })
	}
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	got := b.unanswered()
	for _, k := range []string{"user_name", "mrtr-1", "mrtr-2", "mrtr-3", "bad", "mrtr-4"} {
		in, ok := got[k]
		if !ok {
			t.Errorf("no input request under %s (keys %v)", k, keys(got))
			continue
		}
		if gjson.GetBytes(in.Params, "_meta").Exists() {
			t.Errorf("%s: the hint reached the client: %s", k, in.Params)
		}
	}
	if len(got) != 6 || got["confirm"].Method != "" {
		t.Errorf("keys %v, want user_name bad mrtr-1..4 (confirm answered from the preset)", keys(got))
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 200 {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("condition not reached")
}

func keys(m sep2663.InputRequests) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// TestUndeclaredURLElicitationSaysSo pins issue 16 item 17 on the reverse route: a held
// call's URL-mode elicitation for a client that declared only form mode is refused with a
// -32021 whose message names elicitation.url (not just "elicitation", which it declared),
// and whose requiredCapabilities ask for exactly that mode.
func TestUndeclaredURLElicitationSaysSo(t *testing.T) {
	for _, caps := range []string{`{"elicitation":{"form":{}}}`, `{}`} {
		err := undeclaredInput(json.RawMessage(caps), map[string]sep2663.InputRequest{
			"mrtr-1": {Method: "elicitation/create", Params: json.RawMessage(`{"mode":"url","url":"https://example.com/login","message":"Sign in","elicitationId":"e"}`)},
		})
		je, ok := err.(*jsonrpc.Error)
		if !ok || je.Code != sep2663.ErrMissingCapability.Code || !strings.Contains(je.Message, "client capability elicitation.url") ||
			!gjson.GetBytes(je.Data, "requiredCapabilities.elicitation.url").IsObject() {
			t.Errorf("undeclared URL elicitation with %s: %#v", caps, err)
		}
	}
	if err := undeclaredInput(json.RawMessage(`{"elicitation":{"url":{}}}`), map[string]sep2663.InputRequest{
		"mrtr-1": {Method: "elicitation/create", Params: json.RawMessage(`{"mode":"url","url":"https://example.com/login","message":"Sign in","elicitationId":"e"}`)},
	}); err != nil {
		t.Fatalf("declared URL elicitation refused: %v", err)
	}
}
