package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

// testReverseRecords: the reverse route writes its intent without an upstream task or
// session, learns both in one compare-and-swap, counts and resumes the record like any
// unfinished task, and keeps the upstream's id of each relayed input request.
func testReverseRecords(t *testing.T, s store.Store) {
	ctx := t.Context()
	intent := &record.Task{
		ID: "rv1", Owner: "principal:alice", Origin: "http://legacy.example/mcp", Mode: record.ModeReverse,
		Tool: "confirm_delete", ArgsHash: "00", Status: record.StatusWorking, Outcome: record.OutcomePending,
		CreatedAt: base, LastUpdatedAt: base,
	}
	must(t, s.CreateTask(ctx, intent), "CreateTask intent")
	got, err := s.GetTask(ctx, "rv1")
	must(t, err, "GetTask intent")
	if got.UpstreamTaskID != "" || got.UpstreamSessionID != "" || got.SessionID != "" {
		t.Fatalf("intent: upstream task %q session %q legacy session %q, want all empty", got.UpstreamTaskID, got.UpstreamSessionID, got.SessionID)
	}
	got.UpstreamTaskID, got.UpstreamSessionID = "up-1", "mcp-session-1"
	must(t, s.UpdateTask(ctx, got), "UpdateTask created")
	again, err := s.GetTask(ctx, "rv1")
	must(t, err, "GetTask created")
	if again.UpstreamTaskID != "up-1" || again.UpstreamSessionID != "mcp-session-1" || again.Mode != record.ModeReverse {
		t.Errorf("created: %+v", again)
	}
	if n, err := s.CountActive(ctx, "principal:alice"); err != nil || n != 1 {
		t.Errorf("CountActive = %d, %v; want 1", n, err)
	}
	active, err := s.ListActive(ctx)
	must(t, err, "ListActive")
	if len(active) != 1 || active[0].UpstreamSessionID != "mcp-session-1" {
		t.Errorf("ListActive = %d records (%+v), want the reverse task with its session", len(active), active)
	}

	at := base.Add(time.Second)
	in := []record.Input{{TaskID: "rv1", Key: "in-3", Method: "elicitation/create",
		Params: json.RawMessage(`{"message":"Delete?"}`), UpstreamRequestID: json.RawMessage(`3`), DeliveredAt: &at}}
	must(t, s.PutInputs(ctx, in), "PutInputs")
	checkInputs(t, s, "rv1", in)
	first, err := s.AnswerInput(ctx, "rv1", "in-3", json.RawMessage(`{"action":"accept"}`), at)
	if err != nil || !first {
		t.Fatalf("AnswerInput = %v, %v", first, err)
	}
	list, _ := s.ListInputs(ctx, "rv1")
	if len(list) != 1 || string(list[0].UpstreamRequestID) != `3` || list[0].AnsweredAt == nil {
		t.Errorf("answered input: %+v", list)
	}

	// A pass-through record's id is derived from the upstream's: a second record for the
	// same upstream task is a conflict, the same id of another upstream is not.
	pt := &record.Task{ID: record.PassThroughID("http://modern.example/mcp", "t-1"), Owner: "principal:alice",
		Origin: "http://modern.example/mcp", UpstreamTaskID: "t-1", Mode: record.ModePassThrough,
		Status: record.StatusWorking, Outcome: record.OutcomePending, CreatedAt: base, LastUpdatedAt: base}
	must(t, s.CreateTask(ctx, pt), "CreateTask pass-through")
	dup := *pt
	dup.Owner = "principal:bob"
	if err := s.CreateTask(ctx, &dup); !errors.Is(err, store.ErrConflict) {
		t.Errorf("second pass-through record of one upstream task: %v, want ErrConflict", err)
	}
	other := *pt
	other.ID, other.Origin = record.PassThroughID("http://other.example/mcp", "t-1"), "http://other.example/mcp"
	must(t, s.CreateTask(ctx, &other), "CreateTask pass-through of another upstream")
	if owner, _ := s.GetTask(ctx, pt.ID); owner == nil || owner.Owner != "principal:alice" {
		t.Errorf("pass-through record owner: %+v, want alice's", owner)
	}
}
