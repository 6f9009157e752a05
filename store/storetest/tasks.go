package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

func testSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	full := &record.Session{
		ID:                 "s1",
		ProtocolVersion:    "2025-11-25",
		ClientInfo:         json.RawMessage(`{"name":"c", "version":"1.0"}`),
		ClientCapabilities: json.RawMessage(`{"elicitation":{}}`),
		Principal:          "alice",
		CreatedAt:          base,
		LastSeenAt:         base.Add(time.Second),
		UpstreamSessionID:  "upstream-session-7f3a",
	}
	bare := &record.Session{ID: "s2", ProtocolVersion: "2025-06-18", CreatedAt: base, LastSeenAt: base}
	for _, in := range []*record.Session{full, bare} {
		must(t, s.CreateSession(ctx, in), "CreateSession "+in.ID)
		got, err := s.GetSession(ctx, in.ID)
		must(t, err, "GetSession "+in.ID)
		want := *in
		want.CreatedAt, want.LastSeenAt = ms(in.CreatedAt), ms(in.LastSeenAt)
		want.ClientInfo, want.ClientCapabilities = rawNorm(in.ClientInfo), rawNorm(in.ClientCapabilities)
		if d := diff(&want, got); d != "" {
			t.Errorf("session %s differs:%s", in.ID, d)
		}
	}
	wantErr(t, s.CreateSession(ctx, &record.Session{ID: "s1", CreatedAt: base, LastSeenAt: base}), store.ErrConflict, "CreateSession duplicate")
	_, err := s.GetSession(ctx, "nope")
	wantErr(t, err, store.ErrNotFound, "GetSession unknown")
	wantErr(t, s.CloseSession(ctx, "nope"), store.ErrNotFound, "CloseSession unknown")

	must(t, s.CloseSession(ctx, "s1"), "CloseSession")
	must(t, s.CloseSession(ctx, "s1"), "CloseSession again")
	got, err := s.GetSession(ctx, "s1")
	must(t, err, "GetSession")
	if !got.Closed || got.Principal != "alice" {
		t.Errorf("after CloseSession: Closed=%v Principal=%q, want true, alice", got.Closed, got.Principal)
	}
	if got, _ := s.GetSession(ctx, "s2"); got == nil || got.Closed {
		t.Errorf("CloseSession s1 closed s2 too")
	}
}

func testTouchSession(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, s.CreateSession(ctx, &record.Session{ID: "s1", CreatedAt: base, LastSeenAt: base}), "CreateSession")
	later := base.Add(time.Minute + 7*time.Microsecond)
	must(t, s.TouchSession(ctx, "s1", later), "TouchSession")
	must(t, s.TouchSession(ctx, "s1", base.Add(time.Second)), "TouchSession earlier")
	got, err := s.GetSession(ctx, "s1")
	must(t, err, "GetSession")
	if !got.LastSeenAt.Equal(ms(later)) || !got.CreatedAt.Equal(ms(base)) {
		t.Errorf("after touches: CreatedAt %v LastSeenAt %v, want %v %v", got.CreatedAt, got.LastSeenAt, ms(base), ms(later))
	}
	wantErr(t, s.TouchSession(ctx, "nope", later), store.ErrNotFound, "TouchSession unknown")
}

func testCreateTaskConflicts(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newTask("t1", "alice")
	a.IdempotencyKey = "key-1"
	a.Version = 42 // ignored: a new task starts at version 1
	must(t, s.CreateTask(ctx, a), "CreateTask")
	if a.Version != 1 {
		t.Errorf("Version after CreateTask = %d, want 1", a.Version)
	}
	stored := normTask(a)

	cases := []struct {
		name string
		mod  func(*record.Task)
		want error
	}{
		{"same id", func(x *record.Task) { x.ID = "t1"; x.RequestID = "99" }, store.ErrConflict},
		{"same id other owner", func(x *record.Task) { x.ID = "t1"; x.Owner = "bob"; x.SessionID = "sb"; x.RequestID = "98" }, store.ErrConflict},
		{"same owner and key", func(x *record.Task) { x.IdempotencyKey = "key-1"; x.RequestID = "97" }, store.ErrConflict},
		{"same session and request", func(x *record.Task) { x.RequestID = a.RequestID }, store.ErrConflict},
		{"same key other owner", func(x *record.Task) { x.Owner = "bob"; x.SessionID = "sb"; x.IdempotencyKey = "key-1" }, nil},
		{"same request other session", func(x *record.Task) { x.SessionID = "other"; x.RequestID = a.RequestID }, nil},
		{"empty key and request 1", func(x *record.Task) { x.RequestID = "" }, nil},
		{"empty key and request 2", func(x *record.Task) { x.RequestID = "" }, nil},
	}
	for i, c := range cases {
		x := newTask(fmt.Sprintf("c%d", i), "alice")
		c.mod(x)
		err := s.CreateTask(ctx, x)
		if c.want == nil {
			must(t, err, c.name)
		} else {
			wantErr(t, err, c.want, c.name)
		}
	}
	got, err := s.GetTask(ctx, "t1")
	must(t, err, "GetTask")
	checkTask(t, stored, got, "t1 after conflicting creates")
}

func testGetTaskNotFound(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, s.CreateTask(ctx, newTask("t1", "alice")), "CreateTask")
	for _, id := range []string{"t2", "T1", ""} {
		got, err := s.GetTask(ctx, id)
		wantErr(t, err, store.ErrNotFound, fmt.Sprintf("GetTask(%q)", id))
		if got != nil {
			t.Errorf("GetTask(%q) returned a task with ErrNotFound", id)
		}
	}
}

func testTaskRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	full := newTask("full", "alice")
	full.IdempotencyKey = "k"
	sparse := &record.Task{
		ID: "sparse", Owner: "session:abc", Mode: record.ModeHost, Status: record.StatusWorking,
		Outcome: record.OutcomePending, CreatedAt: base, LastUpdatedAt: base,
	}
	zeroTTL := newTask("zero-ttl", "alice")
	zeroTTL.TTLMs = ptr[int64](0) // a zero ttl is not an unlimited one
	zeroTTL.Result, zeroTTL.Error, zeroTTL.ProgressToken = nil, json.RawMessage{}, json.RawMessage(`42`)
	utc := newTask("utc", "alice")
	utc.CreatedAt = time.Now()            // carries a monotonic reading
	utc.LastUpdatedAt = time.UnixMilli(1) // the epoch edge
	utc.ProgressToken = json.RawMessage(`{"deep":[1,2,{"x":null}]} `)
	for _, in := range []*record.Task{full, sparse, zeroTTL, utc} {
		must(t, s.CreateTask(ctx, in), "CreateTask "+in.ID)
		got, err := s.GetTask(ctx, in.ID)
		must(t, err, "GetTask "+in.ID)
		checkTask(t, normTask(in), got, in.ID)
		if got.CreatedAt.Location() != time.UTC || got.LastUpdatedAt.Location() != time.UTC {
			t.Errorf("%s: times not in UTC: %v %v", in.ID, got.CreatedAt.Location(), got.LastUpdatedAt.Location())
		}
	}
	// The returned task is the caller's: mutating it must not affect the store.
	got, _ := s.GetTask(ctx, "full")
	got.Result[0] = 'X'
	again, _ := s.GetTask(ctx, "full")
	checkTask(t, normTask(full), again, "full after mutating a returned copy")
}

func testFindTask(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newTask("t1", "alice")
	a.SessionID, a.RequestID, a.IdempotencyKey = "s1", "7", "idem"
	b := newTask("t2", "bob")
	b.SessionID, b.RequestID, b.IdempotencyKey = "s2", "7", "idem"
	c := newTask("t3", "alice")
	c.SessionID, c.RequestID = "s1", ""
	for _, x := range []*record.Task{a, b, c} {
		must(t, s.CreateTask(ctx, x), "CreateTask "+x.ID)
	}
	got, err := s.FindTaskByRequest(ctx, "s1", "7")
	must(t, err, "FindTaskByRequest")
	checkTask(t, normTask(a), got, "FindTaskByRequest(s1, 7)")
	got, err = s.FindTaskByRequest(ctx, "s2", "7")
	if err != nil || got.ID != "t2" {
		t.Errorf("FindTaskByRequest(s2, 7) = %v, %v; want t2", got, err)
	}
	for _, k := range [][2]string{{"s1", `"7"`}, {"s3", "7"}, {"s1", ""}} {
		_, err := s.FindTaskByRequest(ctx, k[0], k[1])
		wantErr(t, err, store.ErrNotFound, fmt.Sprintf("FindTaskByRequest(%q, %q)", k[0], k[1]))
	}

	got, err = s.FindTaskByIdempotencyKey(ctx, "alice", "idem")
	must(t, err, "FindTaskByIdempotencyKey")
	checkTask(t, normTask(a), got, "FindTaskByIdempotencyKey(alice, idem)")
	got, err = s.FindTaskByIdempotencyKey(ctx, "bob", "idem")
	if err != nil || got.ID != "t2" {
		t.Errorf("FindTaskByIdempotencyKey(bob, idem) = %v, %v; want t2", got, err)
	}
	for _, k := range [][2]string{{"carol", "idem"}, {"alice", "IDEM"}, {"alice", ""}} {
		_, err := s.FindTaskByIdempotencyKey(ctx, k[0], k[1])
		wantErr(t, err, store.ErrNotFound, fmt.Sprintf("FindTaskByIdempotencyKey(%q, %q)", k[0], k[1]))
	}
}

// mutate sets every mutable field of x to a new value.
func mutate(x *record.Task, n int) {
	x.UpstreamTaskID = fmt.Sprintf("up-%d", n)
	x.Mode = record.ModeComplete
	x.Status = record.StatusCompleted
	x.StatusMessage = fmt.Sprintf("done %d", n)
	x.LastUpdatedAt = base.Add(time.Duration(n)*time.Second + 999*time.Microsecond)
	x.TTLMs = ptr(int64(n))
	x.PollIntervalMs = int64(2000 + n)
	x.UpstreamPollMs = int64(3000 + n)
	x.Result = json.RawMessage(fmt.Sprintf(`{"n": %d}`, n))
	x.Error = nil
	x.Outcome = record.OutcomeSucceeded
	x.OutcomeDetail = fmt.Sprintf("detail %d", n)
	x.UpstreamSessionID = fmt.Sprintf("upsess-%d", n)
}

func testUpdateTaskCAS(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, s.CreateTask(ctx, newTask("t1", "alice")), "CreateTask")
	v1, err := s.GetTask(ctx, "t1")
	must(t, err, "GetTask")
	if v1.Version != 1 {
		t.Fatalf("stored Version = %d, want 1", v1.Version)
	}
	next := *v1
	mutate(&next, 1)
	must(t, s.UpdateTask(ctx, &next), "UpdateTask")
	if next.Version != 2 {
		t.Errorf("Version after UpdateTask = %d, want 2", next.Version)
	}
	got, err := s.GetTask(ctx, "t1")
	must(t, err, "GetTask")
	checkTask(t, normTask(&next), got, "after UpdateTask")

	stale := *v1 // still at version 1
	mutate(&stale, 2)
	wantErr(t, s.UpdateTask(ctx, &stale), store.ErrConflict, "UpdateTask stale")
	if stale.Version != 1 {
		t.Errorf("Version after failed UpdateTask = %d, want 1 (unchanged)", stale.Version)
	}
	got, _ = s.GetTask(ctx, "t1")
	checkTask(t, normTask(&next), got, "after stale UpdateTask")

	// TTL back to unlimited and JSON back to nil must be written too.
	next.TTLMs, next.Result, next.Error = nil, nil, json.RawMessage(`{"code":1,"message":"m"}`)
	must(t, s.UpdateTask(ctx, &next), "UpdateTask clearing fields")
	got, _ = s.GetTask(ctx, "t1")
	checkTask(t, normTask(&next), got, "after clearing fields")
	if got.Version != 3 {
		t.Errorf("Version = %d, want 3", got.Version)
	}

	ghost := newTask("ghost", "alice")
	ghost.Version = 1
	wantErr(t, s.UpdateTask(ctx, ghost), store.ErrNotFound, "UpdateTask unknown id")
}

func testUpdateTaskKeepsIdentity(t *testing.T, s store.Store) {
	ctx := t.Context()
	orig := newTask("t1", "alice")
	orig.IdempotencyKey = "k"
	must(t, s.CreateTask(ctx, orig), "CreateTask")
	x := *orig
	x.Owner, x.SessionID, x.RequestID, x.IdempotencyKey = "mallory", "sm", "1", "k2"
	x.Origin, x.Tool, x.ArgsHash, x.CreatedAt = "https://evil.example", "other", "00", base.Add(time.Hour)
	x.ProgressToken = json.RawMessage(`"other"`)
	x.TraceParent = "00-11111111111111111111111111111111-2222222222222222-01"
	x.ClientCaps = `{"sampling":{}}`
	mutate(&x, 5)
	must(t, s.UpdateTask(ctx, &x), "UpdateTask")
	want := *orig
	mutate(&want, 5)
	want.Version = 2
	got, err := s.GetTask(ctx, "t1")
	must(t, err, "GetTask")
	checkTask(t, normTask(&want), got, "identity fields after UpdateTask")
	if l, _ := s.ListTasks(ctx, "mallory", nil, 0); len(l) != 0 {
		t.Errorf("UpdateTask moved the task to another owner")
	}
}

func testUpdateTaskConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, s.CreateTask(ctx, newTask("t1", "alice")), "CreateTask")
	const workers, rounds = 10, 3
	for round := range rounds {
		cur, err := s.GetTask(ctx, "t1")
		must(t, err, "GetTask")
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []int
		)
		for w := range workers {
			wg.Go(func() {
				x := *cur
				mutate(&x, round*100+w)
				err := s.UpdateTask(ctx, &x)
				switch {
				case err == nil:
					mu.Lock()
					winners = append(winners, w)
					mu.Unlock()
				case !errors.Is(err, store.ErrConflict):
					t.Errorf("worker %d: UpdateTask: %v, want nil or ErrConflict", w, err)
				}
			})
		}
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("round %d: %d winners at version %d, want exactly 1", round, len(winners), cur.Version)
		}
		got, _ := s.GetTask(ctx, "t1")
		want := fmt.Sprintf("done %d", round*100+winners[0])
		if got.Version != cur.Version+1 || got.StatusMessage != want {
			t.Errorf("round %d: stored version %d message %q, want %d %q", round, got.Version, got.StatusMessage, cur.Version+1, want)
		}
	}
}

func ids(ts []*record.Task) []string {
	out := make([]string, len(ts))
	for i, x := range ts {
		out[i] = x.ID
	}
	return out
}

func testListTasksPagination(t *testing.T, s store.Store) {
	ctx := t.Context()
	var want []string
	// 25 tasks with one CreatedAt: only the id orders them. Ids mix case and punctuation
	// so a collation-aware comparison would disagree with byte order.
	for i := range 25 {
		id := fmt.Sprintf("%c-%02d", "aB_zA"[i%5], i)
		x := newTask(id, "alice")
		x.RequestID = ""
		must(t, s.CreateTask(ctx, x), "CreateTask")
		want = append(want, id)
	}
	for i := range 5 { // other owners' tasks interleave
		x := newTask(fmt.Sprintf("m-%02d", i), "bob")
		x.RequestID = ""
		must(t, s.CreateTask(ctx, x), "CreateTask")
	}
	slices.SortFunc(want, func(a, b string) int { return -bytes.Compare([]byte(a), []byte(b)) })

	for _, limit := range []int{1, 7, 25, 100} {
		var got []string
		var after *store.Cursor
		for page := 0; ; page++ {
			if page > 30 {
				t.Fatalf("limit %d: pagination does not end", limit)
			}
			ts, err := s.ListTasks(ctx, "alice", after, limit)
			must(t, err, "ListTasks")
			if len(ts) > limit {
				t.Fatalf("limit %d: page of %d", limit, len(ts))
			}
			if len(ts) == 0 {
				break
			}
			got = append(got, ids(ts)...)
			last := ts[len(ts)-1]
			after = &store.Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
		}
		if !slices.Equal(got, want) {
			t.Errorf("limit %d: listed\n  %v\nwant\n  %v", limit, got, want)
		}
	}
	all, err := s.ListTasks(ctx, "alice", nil, 0)
	must(t, err, "ListTasks limit 0")
	if !slices.Equal(ids(all), want) {
		t.Errorf("limit 0: listed %v, want all %v", ids(all), want)
	}
	none, err := s.ListTasks(ctx, "carol", nil, 10)
	must(t, err, "ListTasks unknown owner")
	if len(none) != 0 {
		t.Errorf("unknown owner: listed %v", ids(none))
	}
}

func testListTasksOrder(t *testing.T, s store.Store) {
	ctx := t.Context()
	// Created out of order; CreatedAt decides, then id.
	spec := []struct {
		id string
		at time.Duration
	}{{"a", 3 * time.Second}, {"b", time.Second}, {"c", 2 * time.Second}, {"d", 2 * time.Second}, {"e", 0}}
	for _, sp := range spec {
		x := newTask(sp.id, "alice")
		x.CreatedAt = base.Add(sp.at)
		must(t, s.CreateTask(ctx, x), "CreateTask")
	}
	all, err := s.ListTasks(ctx, "alice", nil, 10)
	must(t, err, "ListTasks")
	if want := []string{"a", "d", "c", "b", "e"}; !slices.Equal(ids(all), want) {
		t.Errorf("listed %v, want %v", ids(all), want)
	}
	checkTask(t, normTask(newTaskAt("a", 3*time.Second)), all[0], "listed task")
	// A cursor between stored positions (the id need not exist).
	after := &store.Cursor{CreatedAt: ms(base.Add(2 * time.Second)), ID: "cz"}
	rest, err := s.ListTasks(ctx, "alice", after, 10)
	must(t, err, "ListTasks after cursor")
	if want := []string{"c", "b", "e"}; !slices.Equal(ids(rest), want) {
		t.Errorf("after %+v: listed %v, want %v", after, ids(rest), want)
	}
}

func newTaskAt(id string, at time.Duration) *record.Task {
	x := newTask(id, "alice")
	x.CreatedAt = base.Add(at)
	x.Version = 1
	return x
}

func testListActive(t *testing.T, s store.Store) {
	ctx := t.Context()
	statuses := []record.Status{record.StatusWorking, record.StatusInputRequired, record.StatusCompleted, record.StatusFailed, record.StatusCancelled}
	var want []string
	for i, st := range statuses {
		for j, owner := range []string{"alice", "bob"} {
			x := newTask(fmt.Sprintf("%s-%d", owner, i), owner)
			x.Status = st
			x.CreatedAt = base.Add(time.Duration(i*2+j) * time.Second)
			must(t, s.CreateTask(ctx, x), "CreateTask")
			if !st.Terminal() {
				want = append(want, x.ID)
			}
		}
	}
	// A task that becomes terminal leaves the active set.
	x, _ := s.GetTask(ctx, "alice-0")
	x.Status = record.StatusCompleted
	must(t, s.UpdateTask(ctx, x), "UpdateTask")
	want = slices.DeleteFunc(want, func(id string) bool { return id == "alice-0" })

	got, err := s.ListActive(ctx)
	must(t, err, "ListActive")
	gotIDs := ids(got)
	slices.Sort(gotIDs)
	slices.Sort(want)
	if !slices.Equal(gotIDs, want) {
		t.Errorf("ListActive = %v, want %v", gotIDs, want)
	}
	for _, g := range got {
		if g.Status.Terminal() || g.Version == 0 || g.Owner == "" {
			t.Errorf("ListActive returned %s status %s version %d owner %q", g.ID, g.Status, g.Version, g.Owner)
		}
	}

	// Unsettled: terminal, upstream-backed, outcome still pending (a cancel the upstream
	// may not have heard of). alice-0 completed with a pending outcome but no upstream id
	// is not one; give it an upstream id and it is.
	unsettled, err := s.ListUnsettled(ctx)
	must(t, err, "ListUnsettled")
	for _, u := range unsettled {
		if !u.Status.Terminal() || u.Outcome != record.OutcomePending || u.UpstreamTaskID == "" {
			t.Errorf("ListUnsettled returned %s status %s outcome %s upstream %q", u.ID, u.Status, u.Outcome, u.UpstreamTaskID)
		}
	}
	x, _ = s.GetTask(ctx, "alice-0")
	x.Status, x.Outcome, x.UpstreamTaskID = record.StatusCancelled, record.OutcomePending, "up-alice-0"
	must(t, s.UpdateTask(ctx, x), "UpdateTask")
	unsettled, err = s.ListUnsettled(ctx)
	must(t, err, "ListUnsettled")
	if !slices.Contains(ids(unsettled), "alice-0") {
		t.Errorf("ListUnsettled = %v, want alice-0 (cancelled, outcome pending)", ids(unsettled))
	}
	x.Outcome = record.OutcomeSucceeded
	must(t, s.UpdateTask(ctx, x), "UpdateTask")
	unsettled, _ = s.ListUnsettled(ctx)
	if slices.Contains(ids(unsettled), "alice-0") {
		t.Error("ListUnsettled still lists a task whose outcome is known")
	}
}
