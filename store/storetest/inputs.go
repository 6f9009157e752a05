package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

func newInputs(taskID string) []record.Input {
	return []record.Input{
		{TaskID: taskID, Key: "k2", Method: "sampling/createMessage", Params: json.RawMessage(`{"messages":[], "maxTokens": 10}`)},
		{TaskID: taskID, Key: "k1", Method: "elicitation/create", Params: json.RawMessage(`{"message":"name?" ,"requestedSchema":{}}`),
			UpstreamRequestID: json.RawMessage(`"up-7"`)},
	}
}

// checkInputs fails t unless ListInputs(taskID) returns want (in key order).
func checkInputs(t *testing.T, s store.Store, taskID string, want []record.Input) {
	t.Helper()
	got, err := s.ListInputs(t.Context(), taskID)
	must(t, err, "ListInputs")
	if len(got) != len(want) {
		t.Fatalf("ListInputs(%s): %d inputs, want %d", taskID, len(got), len(want))
	}
	for i := range want {
		if d := diff(normInput(want[i]), got[i]); d != "" {
			t.Errorf("ListInputs(%s)[%d] differs:%s", taskID, i, d)
		}
	}
}

func setupInputs(t *testing.T, s store.Store) []record.Input {
	t.Helper()
	must(t, s.CreateTask(t.Context(), newTask("t1", "alice")), "CreateTask")
	in := newInputs("t1")
	must(t, s.PutInputs(t.Context(), in), "PutInputs")
	return in
}

func testInputs(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := setupInputs(t, s)
	checkInputs(t, s, "t1", []record.Input{in[1], in[0]})

	// Again, with changed params and one new input: existing ones stay as they were.
	again := newInputs("t1")
	again[0].Params = json.RawMessage(`{"changed":true}`)
	again[1].Method = "roots/list"
	at := base.Add(time.Second)
	k3 := record.Input{TaskID: "t1", Key: "k0", Method: "roots/list", RequestID: "b-9", DeliveredAt: &at,
		UpstreamRequestID: json.RawMessage(`12`)}
	must(t, s.PutInputs(ctx, append(again, k3)), "PutInputs again")
	checkInputs(t, s, "t1", []record.Input{k3, in[1], in[0]})

	must(t, s.PutInputs(ctx, nil), "PutInputs(nil)")
	got, err := s.ListInputs(ctx, "nope")
	must(t, err, "ListInputs unknown task")
	if len(got) != 0 {
		t.Errorf("ListInputs(unknown) = %d inputs", len(got))
	}
	wantErr(t, s.PutInputs(ctx, newInputs("nope")), store.ErrNotFound, "PutInputs unknown task")
}

func testInputDelivery(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := setupInputs(t, s)
	at := base.Add(2 * time.Second)
	must(t, s.MarkInputDelivered(ctx, "t1", "k1", "bridge-1", at), "MarkInputDelivered")
	want := in[1]
	want.RequestID, want.DeliveredAt = "bridge-1", &at
	got, err := s.FindInputByRequestID(ctx, "bridge-1")
	must(t, err, "FindInputByRequestID")
	if d := diff(normInput(want), *got); d != "" {
		t.Errorf("FindInputByRequestID differs:%s", d)
	}
	checkInputs(t, s, "t1", []record.Input{want, in[0]})

	// The first delivery's id wins: two processes racing to deliver one input must not
	// leave a client holding an id the store no longer knows.
	at2 := at.Add(time.Second)
	wantErr(t, s.MarkInputDelivered(ctx, "t1", "k1", "bridge-2", at2), store.ErrConflict, "MarkInputDelivered again")
	if got, err := s.FindInputByRequestID(ctx, "bridge-1"); err != nil || got.Key != "k1" || !got.DeliveredAt.Equal(ms(at)) {
		t.Errorf("FindInputByRequestID(bridge-1) after a second delivery = %+v, %v", got, err)
	}
	_, err = s.FindInputByRequestID(ctx, "bridge-2")
	wantErr(t, err, store.ErrNotFound, "FindInputByRequestID(loser's id)")

	wantErr(t, s.MarkInputDelivered(ctx, "t1", "k2", "bridge-1", at), store.ErrConflict, "MarkInputDelivered with a taken request id")
	wantErr(t, s.MarkInputDelivered(ctx, "t1", "nope", "bridge-3", at), store.ErrNotFound, "MarkInputDelivered unknown key")
	wantErr(t, s.MarkInputDelivered(ctx, "nope", "k1", "bridge-4", at), store.ErrNotFound, "MarkInputDelivered unknown task")
	for _, id := range []string{"", "bridge-3", "nope"} {
		_, err := s.FindInputByRequestID(ctx, id)
		wantErr(t, err, store.ErrNotFound, fmt.Sprintf("FindInputByRequestID(%q)", id))
	}
}

func testAnswerInput(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := setupInputs(t, s)
	at := base.Add(3 * time.Second)
	first, err := s.AnswerInput(ctx, "t1", "k2", json.RawMessage(`{"role":"assistant", "content":{}}`), at)
	must(t, err, "AnswerInput")
	if !first {
		t.Errorf("first AnswerInput: first = false")
	}
	first, err = s.AnswerInput(ctx, "t1", "k2", json.RawMessage(`{"second":true}`), at.Add(time.Second))
	must(t, err, "AnswerInput again")
	if first {
		t.Errorf("second AnswerInput: first = true")
	}
	want := in[0]
	want.Response, want.AnsweredAt = json.RawMessage(`{"role":"assistant", "content":{}}`), &at
	checkInputs(t, s, "t1", []record.Input{in[1], want})

	_, err = s.AnswerInput(ctx, "t1", "nope", json.RawMessage(`{}`), at)
	wantErr(t, err, store.ErrNotFound, "AnswerInput unknown key")
	_, err = s.AnswerInput(ctx, "nope", "k1", json.RawMessage(`{}`), at)
	wantErr(t, err, store.ErrNotFound, "AnswerInput unknown task")
}

func testAnswerInputConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	setupInputs(t, s)
	const n = 20
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		winner = -1
		firsts int
	)
	for i := range n {
		wg.Go(func() {
			first, err := s.AnswerInput(ctx, "t1", "k1", json.RawMessage(fmt.Sprintf(`{"action":"accept","i":%d}`, i)), base)
			if err != nil {
				t.Errorf("AnswerInput %d: %v", i, err)
				return
			}
			if first {
				mu.Lock()
				firsts++
				winner = i
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firsts != 1 {
		t.Fatalf("%d of %d concurrent answers reported first=true, want exactly 1", firsts, n)
	}
	got, err := s.ListInputs(ctx, "t1")
	must(t, err, "ListInputs")
	if want := fmt.Sprintf(`{"action":"accept","i":%d}`, winner); string(got[0].Response) != want {
		t.Errorf("stored answer %s, want the winner's %s", got[0].Response, want)
	}
}

func testMarkInputForwarded(t *testing.T, s store.Store) {
	ctx := t.Context()
	in := setupInputs(t, s)
	at := base.Add(4 * time.Second)
	must(t, s.MarkInputForwarded(ctx, "t1", "k1", at), "MarkInputForwarded")
	must(t, s.MarkInputForwarded(ctx, "t1", "k1", at.Add(time.Minute)), "MarkInputForwarded again")
	want := in[1]
	want.ForwardedAt = &at
	checkInputs(t, s, "t1", []record.Input{want, in[0]})
	wantErr(t, s.MarkInputForwarded(ctx, "t1", "nope", at), store.ErrNotFound, "MarkInputForwarded unknown key")
}

func testPingClose(t *testing.T, s store.Store) {
	must(t, s.Ping(t.Context()), "Ping")
	must(t, s.Close(), "Close")
	must(t, s.Close(), "Close again")
}
