// Package storetest is the behaviour suite every store.Store implementation must pass. The
// SQLite and PostgreSQL stores run it from their own tests, so both keep one contract.
//
// Beyond the store.Store doc comments, the suite pins down these semantics:
//
//   - Times come back in UTC, truncated to the millisecond.
//   - JSON fields come back byte for byte; nil and empty both come back nil.
//   - UpstreamSessionID is mutable (the reverse route learns it with the upstream's task
//     id); Input.UpstreamRequestID is written by PutInputs like the other input fields.
//   - UpdateTask ignores the identity fields (ID, Owner, SessionID, RequestID,
//     IdempotencyKey, Origin, Tool, ArgsHash, CreatedAt, ProgressToken, TraceParent, ClientCaps): a task never
//     changes hands. It returns ErrNotFound for an unknown id.
//   - ListTasks with limit <= 0 returns every remaining task; ties on CreatedAt are
//     ordered by ID in byte order, descending.
//   - TouchSession never moves LastSeenAt backwards.
//   - PutInputs for an unknown task returns ErrNotFound; MarkInputDelivered with a request
//     id another input holds returns ErrConflict; MarkInputForwarded keeps the first time.
//   - Lookups by an empty request id or idempotency key find nothing.
//   - Close is safe to call more than once.
package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

// Run runs the suite. open must return a new, empty store for each call and arrange for it
// to be closed when t ends.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Sessions", testSessions},
		{"TouchSession", testTouchSession},
		{"CreateTaskConflicts", testCreateTaskConflicts},
		{"GetTaskNotFound", testGetTaskNotFound},
		{"TaskRoundTrip", testTaskRoundTrip},
		{"FindTask", testFindTask},
		{"UpdateTaskCAS", testUpdateTaskCAS},
		{"UpdateTaskKeepsIdentity", testUpdateTaskKeepsIdentity},
		{"UpdateTaskConcurrent", testUpdateTaskConcurrent},
		{"ListTasksPagination", testListTasksPagination},
		{"ListTasksOrder", testListTasksOrder},
		{"ListActive", testListActive},
		{"Inputs", testInputs},
		{"InputDelivery", testInputDelivery},
		{"AnswerInput", testAnswerInput},
		{"AnswerInputConcurrent", testAnswerInputConcurrent},
		{"MarkInputForwarded", testMarkInputForwarded},
		{"PingClose", testPingClose},
		{"ListSessions", testListSessions},
		{"QueryTasks", testQueryTasks},
		{"CountTasksBySession", testCountTasksBySession},
		{"CountTasksByDay", testCountTasksByDay},
		{"SummarizeClients", testSummarizeClients},
		{"SummarizeClientDays", testSummarizeClientDays},
		{"PurgeSessions", testPurgeSessions},
		{"CountActive", testCountActive},
		{"ReleaseIdempotencyKey", testReleaseIdempotencyKey},
		{"ReleaseRequestID", testReleaseRequestID},
		{"PurgeExpired", testPurgeExpired},
		{"Summary", testSummary},
		{"CheckWritable", testCheckWritable},
		{"ReverseRecords", testReverseRecords},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open(t)) })
	}
}

// base is a time with sub-millisecond digits in a non-UTC zone, so every round trip checks
// truncation and zone.
var base = time.Date(2025, 11, 25, 10, 30, 0, 123_456_789, time.FixedZone("CEST", 2*3600))

// ms returns what the store must give back for tm: UTC, millisecond precision, no
// monotonic reading (so reflect.DeepEqual works).
func ms(tm time.Time) time.Time { return time.UnixMilli(tm.UnixMilli()).UTC() }

func msp(tm *time.Time) *time.Time {
	if tm == nil {
		return nil
	}
	v := ms(*tm)
	return &v
}

func ptr[T any](v T) *T { return &v }

// rawNorm returns what the store must give back for a JSON field.
func rawNorm(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return bytes.Clone(b)
}

// wantErr fails t unless errors.Is(err, want).
func wantErr(t *testing.T, err, want error, what string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: err = %v, want %v", what, err, want)
	}
}

func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// newTask returns a task with every field set to a distinct non-zero value.
func newTask(id, owner string) *record.Task {
	return &record.Task{
		ID:             id,
		Owner:          owner,
		SessionID:      "sess-" + owner,
		RequestID:      `"req-` + id + `"`,
		IdempotencyKey: "",
		Origin:         "https://upstream.example/mcp",
		UpstreamTaskID: "up-" + id,
		Mode:           record.ModeTranslate,
		Tool:           "slow_tool",
		ArgsHash:       "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Status:         record.StatusWorking,
		StatusMessage:  "started",
		CreatedAt:      base,
		LastUpdatedAt:  base.Add(1500 * time.Microsecond),
		TTLMs:          ptr[int64](60_000),
		PollIntervalMs: 1000,
		UpstreamPollMs: 250,
		Result:         json.RawMessage(`{ "content":[{"type":"text","text":"ok"}],  "b":1, "a":"\u00e9" }`),
		Error:          json.RawMessage(`{"code":-32603,"message":"boom"}`),
		Outcome:        record.OutcomePending,
		OutcomeDetail:  "detail",
		ProgressToken:  json.RawMessage(`"tok-1"`),
		TraceParent:    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		ClientCaps:     `{"elicitation":{"form":{}},"roots":{}}`,

		UpstreamSessionID: "upsess-" + id,
	}
}

// normTask returns what the store must give back for t.
func normTask(t *record.Task) *record.Task {
	c := *t
	c.CreatedAt = ms(t.CreatedAt)
	c.LastUpdatedAt = ms(t.LastUpdatedAt)
	if t.TTLMs != nil {
		c.TTLMs = ptr(*t.TTLMs)
	}
	c.Result = rawNorm(t.Result)
	c.Error = rawNorm(t.Error)
	c.ProgressToken = rawNorm(t.ProgressToken)
	return &c
}

func normInput(in record.Input) record.Input {
	in.Params = rawNorm(in.Params)
	in.Response = rawNorm(in.Response)
	in.DeliveredAt = msp(in.DeliveredAt)
	in.AnsweredAt = msp(in.AnsweredAt)
	in.ForwardedAt = msp(in.ForwardedAt)
	in.UpstreamRequestID = rawNorm(in.UpstreamRequestID)
	return in
}

// diff lists the fields in which got differs from want, or "" when they are equal.
func diff(want, got any) string {
	wv, gv := reflect.ValueOf(want), reflect.ValueOf(got)
	if wv.Kind() == reflect.Pointer {
		if wv.IsNil() || gv.IsNil() {
			if wv.IsNil() != gv.IsNil() {
				return fmt.Sprintf("want %v, got %v", want, got)
			}
			return ""
		}
		wv, gv = wv.Elem(), gv.Elem()
	}
	var b strings.Builder
	for i := range wv.NumField() {
		w, g := wv.Field(i).Interface(), gv.Field(i).Interface()
		if !reflect.DeepEqual(w, g) {
			fmt.Fprintf(&b, "\n  %s: want %s, got %s", wv.Type().Field(i).Name, show(w), show(g))
		}
	}
	return b.String()
}

func show(v any) string {
	switch v := v.(type) {
	case json.RawMessage:
		if v == nil {
			return "nil"
		}
		return fmt.Sprintf("%q", v)
	case *int64:
		if v == nil {
			return "nil"
		}
		return fmt.Sprintf("&%d", *v)
	case *time.Time:
		if v == nil {
			return "nil"
		}
		return "&" + v.String()
	}
	return fmt.Sprintf("%#v", v)
}

func checkTask(t *testing.T, want, got *record.Task, what string) {
	t.Helper()
	if d := diff(want, got); d != "" {
		t.Errorf("%s: task differs:%s", what, d)
	}
}
