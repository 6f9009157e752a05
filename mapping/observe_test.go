package mapping

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/sep2663"
)

func i64(v int64) *int64 { return &v }

// task builds an upstream tasks/get body around the status-specific fields in extra.
func task(status, extra string) string {
	return `{"taskId":"up-1","status":"` + status + `","createdAt":"2026-11-29T07:25:58.396Z","lastUpdatedAt":"2026-11-29T07:25:59.397Z","ttlMs":300000,"pollIntervalMs":200` + extra + `}`
}

func decodeTask(t testing.TB, raw string) *sep2663.DetailedTask {
	t.Helper()
	var dt sep2663.DetailedTask
	if err := json.Unmarshal([]byte(raw), &dt); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return &dt
}

var elicit = `{"method":"elicitation/create","params":{"mode":"form","message":"Delete f.txt?","requestedSchema":{"type":"object","properties":{"confirm":{"type":"boolean"}},"required":["confirm"]}}}`

// TestObserve covers every row of design §3 "Status and field mapping" and the decisions
// in doc.go.
func TestObserve(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want Observation
	}{
		{"working", task("working", `,"statusMessage":"step 1/3"`), Observation{
			Status: record.StatusWorking, StatusMessage: "step 1/3", Outcome: record.OutcomePending, TTLMs: i64(300000), PollIntervalMs: 200}},
		{"input_required + inputRequests", task("input_required", `,"inputRequests":{"in-1e02":`+elicit+`}`), Observation{
			Status: record.StatusInputRequired, Outcome: record.OutcomePending, TTLMs: i64(300000), PollIntervalMs: 200,
			Inputs: map[string]sep2663.InputRequest{"in-1e02": {Method: "elicitation/create", Params: json.RawMessage(`{"mode":"form","message":"Delete f.txt?","requestedSchema":{"type":"object","properties":{"confirm":{"type":"boolean"}},"required":["confirm"]}}`)}}}},
		{"input_required without inputRequests shows working", task("input_required", ``), Observation{
			Status: record.StatusWorking, Outcome: record.OutcomePending, TTLMs: i64(300000), PollIntervalMs: 200}},
		{"completed, isError absent", task("completed", `,"result":{"resultType":"complete","content":[{"type":"text","text":"Deleted f.txt"}]}`), Observation{
			Status: record.StatusCompleted, Outcome: record.OutcomeSucceeded, TTLMs: i64(300000), PollIntervalMs: 200,
			Result: json.RawMessage(`{"content":[{"type":"text","text":"Deleted f.txt"}]}`)}},
		{"completed, isError false", task("completed", `,"result":{"content":[],"isError":false,"structuredContent":{"answer":42}}`), Observation{
			Status: record.StatusCompleted, Outcome: record.OutcomeSucceeded, TTLMs: i64(300000), PollIntervalMs: 200,
			Result: json.RawMessage(`{"content":[],"isError":false,"structuredContent":{"answer":42}}`)}},
		{"completed, isError true: failed with the tool's text", task("completed", `,"result":{"resultType":"complete","content":[{"type":"image","data":"x"},{"type":"text","text":""},{"type":"text","text":"rate limit\nexceeded"}],"isError":true}`), Observation{
			Status: record.StatusFailed, StatusMessage: "rate limit exceeded", Outcome: record.OutcomeFailed, TTLMs: i64(300000), PollIntervalMs: 200,
			Result: json.RawMessage(`{"content":[{"type":"image","data":"x"},{"type":"text","text":""},{"type":"text","text":"rate limit\nexceeded"}],"isError":true}`)}},
		{"completed, isError true, upstream message wins", task("completed", `,"statusMessage":"job failed","result":{"content":[{"type":"text","text":"detail"}],"isError":true}`), Observation{
			Status: record.StatusFailed, StatusMessage: "job failed", Outcome: record.OutcomeFailed, TTLMs: i64(300000), PollIntervalMs: 200,
			Result: json.RawMessage(`{"content":[{"type":"text","text":"detail"}],"isError":true}`)}},
		{"completed, isError true, no text", task("completed", `,"result":{"content":[],"isError":true}`), Observation{
			Status: record.StatusFailed, StatusMessage: "tool returned an error", Outcome: record.OutcomeFailed, TTLMs: i64(300000), PollIntervalMs: 200,
			Result: json.RawMessage(`{"content":[],"isError":true}`)}},
		{"completed, isError \"true\" (a string) is not an error", task("completed", `,"result":{"content":[],"isError":"true"}`), Observation{
			Status: record.StatusCompleted, Outcome: record.OutcomeSucceeded, TTLMs: i64(300000), PollIntervalMs: 200,
			Result: json.RawMessage(`{"content":[],"isError":"true"}`)}},
		{"completed without result", task("completed", ``), Observation{
			Status: record.StatusFailed, StatusMessage: msgCompletedNoBody, Outcome: record.OutcomeSucceeded, TTLMs: i64(300000), PollIntervalMs: 200,
			Error: json.RawMessage(`{"code":-32603,"message":"upstream task completed without a valid result","data":{"retryable":false,"outcome":"succeeded"}}`)}},
		{"completed with a non-object result", task("completed", `,"result":[1,2]`), Observation{
			Status: record.StatusFailed, StatusMessage: msgCompletedNoBody, Outcome: record.OutcomeSucceeded, TTLMs: i64(300000), PollIntervalMs: 200,
			Error: json.RawMessage(`{"code":-32603,"message":"upstream task completed without a valid result","data":{"retryable":false,"outcome":"succeeded"}}`)}},
		{"failed + error", task("failed", `,"statusMessage":"Tool execution failed: API rate limit exceeded","error":{"code":-32603,"message":"API rate limit exceeded","data":{"retryAfter":30}}`), Observation{
			Status: record.StatusFailed, StatusMessage: "Tool execution failed: API rate limit exceeded", Outcome: record.OutcomeFailed, TTLMs: i64(300000), PollIntervalMs: 200,
			Error: json.RawMessage(`{"code":-32603,"message":"API rate limit exceeded","data":{"retryAfter":30}}`)}},
		{"failed + error, message from the error", task("failed", `,"error":{"code":-32000,"message":"boom"}`), Observation{
			Status: record.StatusFailed, StatusMessage: "boom", Outcome: record.OutcomeFailed, TTLMs: i64(300000), PollIntervalMs: 200,
			Error: json.RawMessage(`{"code":-32000,"message":"boom"}`)}},
		{"failed without error object", task("failed", ``), Observation{
			Status: record.StatusFailed, StatusMessage: msgFailedNoError, Outcome: record.OutcomeFailed, TTLMs: i64(300000), PollIntervalMs: 200,
			Error: json.RawMessage(`{"code":-32603,"message":"upstream task failed without an error object"}`)}},
		{"cancelled", task("cancelled", ``), Observation{
			Status: record.StatusCancelled, Outcome: record.OutcomeCancelled, TTLMs: i64(300000), PollIntervalMs: 200}},
		{"ttl null, no poll interval", `{"taskId":"x","status":"working","createdAt":"a","lastUpdatedAt":"b","ttlMs":null}`, Observation{
			Status: record.StatusWorking, Outcome: record.OutcomePending}},
		{"negative poll interval is absent", `{"taskId":"x","status":"working","createdAt":"a","lastUpdatedAt":"b","ttlMs":5,"pollIntervalMs":-1}`, Observation{
			Status: record.StatusWorking, Outcome: record.OutcomePending, TTLMs: i64(5)}},
		{"statusMessage sanitized", task("working", `,"statusMessage":"a\u0000b\u001b[31m\nc"`), Observation{
			Status: record.StatusWorking, StatusMessage: "ab[31m c", Outcome: record.OutcomePending, TTLMs: i64(300000), PollIntervalMs: 200}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Observe(decodeTask(t, tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Observe:\n got %s\nwant %s", dump(got), dump(tc.want))
			}
		})
	}
}

func dump(o Observation) string {
	b, _ := json.Marshal(struct {
		Observation
		Result, Error string
	}{o, string(o.Result), string(o.Error)})
	return string(b)
}

// Every draft vocabulary word reaches the legacy status of its SEP-2663 meaning.
func TestObserveDraftVocabulary(t *testing.T) {
	want := map[string]record.Status{
		"submitted": record.StatusWorking, "pending": record.StatusWorking, "queued": record.StatusWorking,
		"running": record.StatusWorking, "in_progress": record.StatusWorking, "IN_PROGRESS": record.StatusWorking,
		"done": record.StatusCompleted, "succeeded": record.StatusCompleted, "success": record.StatusCompleted, "Done": record.StatusCompleted,
		"error": record.StatusFailed, "errored": record.StatusFailed,
		"canceled": record.StatusCancelled, "Canceled": record.StatusCancelled,
	}
	for word, st := range want {
		extra := ""
		switch st {
		case record.StatusCompleted:
			extra = `,"result":{"content":[]}`
		case record.StatusFailed:
			extra = `,"error":{"code":-32603,"message":"x"}`
		}
		got, err := Observe(decodeTask(t, task(word, extra)))
		if err != nil || got.Status != st {
			t.Errorf("%q: status %q, err %v; want %q", word, got.Status, err, st)
		}
	}
}

func TestObserveUnknownStatus(t *testing.T) {
	_, err := Observe(decodeTask(t, task("paused", "")))
	if !errors.Is(err, ErrUnknownStatus) || !strings.Contains(err.Error(), `"paused"`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := Observe(nil); !errors.Is(err, ErrUnknownStatus) {
		t.Fatalf("nil task: err = %v", err)
	}
}

// Observe must not share the upstream's TTL pointer with the observation.
func TestObserveCopiesTTL(t *testing.T) {
	dt := decodeTask(t, task("working", ""))
	o, _ := Observe(dt)
	*dt.TTLMs = 1
	if *o.TTLMs != 300000 {
		t.Fatal("TTL pointer shared")
	}
}

func TestLostTask(t *testing.T) {
	o := LostTask()
	if o.Status != record.StatusFailed || o.Outcome != record.OutcomeUnknown || !strings.Contains(o.StatusMessage, "unknown") {
		t.Fatalf("LostTask = %s", dump(o))
	}
	want := `{"code":-32010,"message":"the upstream server no longer knows this task; its outcome is unknown","data":{"retryable":false,"outcome":"unknown"}}`
	if string(o.Error) != want {
		t.Fatalf("error %s\nwant  %s", o.Error, want)
	}
}

func TestApply(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	now := t0.Add(time.Second)
	rec := func(st record.Status, oc record.Outcome) *record.Task {
		return &record.Task{Status: st, Outcome: oc, CreatedAt: t0, LastUpdatedAt: t0}
	}
	completed, _ := Observe(decodeTask(t, task("completed", `,"result":{"content":[]}`)))

	r := rec(record.StatusWorking, record.OutcomePending)
	if !Apply(r, completed, now) || r.Status != record.StatusCompleted || !r.LastUpdatedAt.Equal(now) ||
		string(r.Result) != `{"content":[]}` || r.Outcome != record.OutcomeSucceeded || r.UpstreamPollMs != 200 {
		t.Fatalf("working → completed: %+v", r)
	}
	if Apply(r, completed, now.Add(time.Second)) {
		t.Fatal("same observation twice reported a change")
	}
	// A terminal record is frozen…
	failed, _ := Observe(decodeTask(t, task("failed", `,"error":{"code":1,"message":"m"}`)))
	if Apply(r, failed, now) || r.Status != record.StatusCompleted || r.Error != nil {
		t.Fatalf("terminal record changed: %+v", r)
	}
	// …but a client-cancelled record learns the real outcome, without a visible change.
	c := rec(record.StatusCancelled, record.OutcomePending)
	if !Apply(c, completed, now) || c.Status != record.StatusCancelled || c.Outcome != record.OutcomeSucceeded ||
		c.Result != nil || !c.LastUpdatedAt.Equal(t0) {
		t.Fatalf("cancelled record: %+v", c)
	}
	if Apply(c, failed, now) || c.Outcome != record.OutcomeSucceeded {
		t.Fatalf("outcome overwritten: %+v", c)
	}
	// A working record still working: only the message moves LastUpdatedAt.
	w := rec(record.StatusWorking, record.OutcomePending)
	working, _ := Observe(decodeTask(t, task("working", `,"statusMessage":"50%"`)))
	if !Apply(w, working, now) || w.StatusMessage != "50%" || !w.LastUpdatedAt.Equal(now) {
		t.Fatalf("progress: %+v", w)
	}
}

func FuzzObserve(f *testing.F) {
	f.Add(task("working", ""))
	f.Add(task("input_required", `,"inputRequests":{"k":`+elicit+`}`))
	f.Add(task("completed", `,"result":{"content":[{"type":"text","text":"x"}],"isError":true}`))
	f.Add(task("completed", `,"result":{"resultType":"complete","content":[]}`))
	f.Add(task("failed", `,"error":{"code":-32603,"message":"m","data":[1]}`))
	f.Add(task("cancelled", ""))
	f.Add(task("Done", `,"result":"str"`))
	f.Add(`{"status":"failed","error":null,"result":{"isError":true}}`)
	legal := map[record.Status]bool{record.StatusWorking: true, record.StatusInputRequired: true,
		record.StatusCompleted: true, record.StatusFailed: true, record.StatusCancelled: true}
	f.Fuzz(func(t *testing.T, raw string) {
		var dt sep2663.DetailedTask
		if json.Unmarshal([]byte(raw), &dt) != nil {
			return
		}
		o, err := Observe(&dt)
		if err != nil {
			if !errors.Is(err, ErrUnknownStatus) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if !legal[o.Status] {
			t.Fatalf("illegal status %q", o.Status)
		}
		if !CanTransition(record.StatusWorking, o.Status) {
			t.Fatalf("status %q unreachable from working", o.Status)
		}
		if o.Status.Terminal() == (o.Outcome == record.OutcomePending) {
			t.Fatalf("status %q with outcome %q", o.Status, o.Outcome)
		}
		switch o.Status {
		case record.StatusCompleted:
			if o.Result == nil || o.Error != nil {
				t.Fatalf("completed without result: %s", dump(o))
			}
		case record.StatusFailed:
			if (o.Result == nil) == (o.Error == nil) {
				t.Fatalf("failed needs exactly one of result and error: %s", dump(o))
			}
		case record.StatusInputRequired:
			if len(o.Inputs) == 0 {
				t.Fatal("input_required without inputs")
			}
		}
		for _, b := range []json.RawMessage{o.Result, o.Error} {
			if b != nil && !json.Valid(b) {
				t.Fatalf("invalid JSON %q", b)
			}
		}
		if o.Result != nil {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(o.Result, &m); err != nil {
				t.Fatalf("result is not an object: %v", err)
			}
			if _, ok := m["resultType"]; ok {
				t.Fatal("resultType kept")
			}
		}
		if o.Error != nil {
			var e struct {
				Code    *int64 `json:"code"`
				Message string `json:"message"`
			}
			if json.Unmarshal(o.Error, &e) != nil || e.Code == nil {
				t.Fatalf("error object without code: %s", o.Error)
			}
		}
		if utf8.RuneCountInString(o.StatusMessage) > MaxStatusMessage || strings.ContainsAny(o.StatusMessage, "\n\r\t\x00") {
			t.Fatalf("unsanitized statusMessage %q", o.StatusMessage)
		}
	})
}
