package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/taskbridge/taskbridge/store"
)

// testListSessions: sessions seen at or after since, most recently seen first, every
// field round-tripped; TouchSession moves a session up.
func testListSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	for i, id := range []string{"old", "mid", "new"} {
		se := &store.Session{ID: id, ProtocolVersion: "2025-11-25",
			ClientInfo: json.RawMessage(fmt.Sprintf(`{"name":"client-%d","version":"1.%d"}`, i, i)),
			Principal:  "p" + id, CreatedAt: base.Add(time.Duration(i) * time.Hour), LastSeenAt: base.Add(time.Duration(i) * time.Hour)}
		must(t, s.CreateSession(ctx, se), "CreateSession")
	}
	ids := func(ss []*store.Session) []string {
		var out []string
		for _, se := range ss {
			out = append(out, se.ID)
		}
		return out
	}
	got, err := s.ListSessions(ctx, base.Add(time.Hour))
	must(t, err, "ListSessions")
	if want := []string{"new", "mid"}; !slices.Equal(ids(got), want) {
		t.Fatalf("ListSessions since +1h = %v, want %v", ids(got), want)
	}
	if got[0].Principal != "pnew" || string(got[0].ClientInfo) != `{"name":"client-2","version":"1.2"}` ||
		!got[0].CreatedAt.Equal(ms(base.Add(2*time.Hour))) || got[0].CreatedAt.Location() != time.UTC {
		t.Errorf("ListSessions row = %+v", got[0])
	}
	must(t, s.TouchSession(ctx, "old", base.Add(3*time.Hour)), "TouchSession")
	got, err = s.ListSessions(ctx, time.Time{})
	must(t, err, "ListSessions all")
	if want := []string{"old", "new", "mid"}; !slices.Equal(ids(got), want) {
		t.Fatalf("ListSessions after touch = %v, want %v", ids(got), want)
	}
}

// testQueryTasks: any owner, filters combine, newest first, limit.
func testQueryTasks(t *testing.T, s store.Store) {
	ctx := t.Context()
	mk := func(id, owner string, st store.Status, at int) {
		tk := newTask(id, owner)
		tk.Status, tk.CreatedAt = st, base.Add(time.Duration(at)*time.Minute)
		must(t, s.CreateTask(ctx, tk), "CreateTask "+id)
	}
	mk("t1", "principal:alice", store.StatusWorking, 1)
	mk("t2", "principal:bob", store.StatusCompleted, 2)
	mk("t3", "principal:alice", store.StatusCompleted, 3)
	mk("t4", "principal:alice", store.StatusWorking, 4)
	ids := func(ts []*store.Task) []string {
		var out []string
		for _, tk := range ts {
			out = append(out, tk.ID)
		}
		return out
	}
	cases := []struct {
		q    store.TaskQuery
		want []string
	}{
		{store.TaskQuery{}, []string{"t4", "t3", "t2", "t1"}},
		{store.TaskQuery{Owner: "principal:alice"}, []string{"t4", "t3", "t1"}},
		{store.TaskQuery{Status: store.StatusCompleted}, []string{"t3", "t2"}},
		{store.TaskQuery{Owner: "principal:alice", Status: store.StatusWorking, Limit: 1}, []string{"t4"}},
		{store.TaskQuery{SessionID: "sess-principal:bob"}, []string{"t2"}},
		{store.TaskQuery{Owner: "principal:carol"}, nil},
	}
	for _, tc := range cases {
		got, err := s.QueryTasks(ctx, tc.q)
		must(t, err, "QueryTasks")
		if !slices.Equal(ids(got), tc.want) {
			t.Errorf("QueryTasks(%+v) = %v, want %v", tc.q, ids(got), tc.want)
		}
	}
	got, err := s.QueryTasks(ctx, store.TaskQuery{Owner: "principal:bob"})
	must(t, err, "QueryTasks bob")
	want := newTask("t2", "principal:bob")
	want.Status, want.CreatedAt, want.Version = store.StatusCompleted, base.Add(2*time.Minute), 1
	checkTask(t, normTask(want), got[0], "QueryTasks row")
}

// testCountTasksBySession: counts per (session, mode) for tasks created since.
func testCountTasksBySession(t *testing.T, s store.Store) {
	ctx := t.Context()
	mk := func(id, sess string, mode store.Mode, at int) {
		tk := newTask(id, "principal:x")
		tk.SessionID, tk.Mode, tk.CreatedAt = sess, mode, base.Add(time.Duration(at)*time.Minute)
		must(t, s.CreateTask(ctx, tk), "CreateTask "+id)
	}
	mk("a", "s1", store.ModeTranslate, 0)
	mk("b", "s1", store.ModeTranslate, 5)
	mk("c", "s1", store.ModeHost, 6)
	mk("d", "s2", store.ModeTranslate, 7)
	got, err := s.CountTasksBySession(ctx, base.Add(time.Minute))
	must(t, err, "CountTasksBySession")
	want := []store.SessionTaskCount{
		{SessionID: "s1", Mode: store.ModeHost, Count: 1},
		{SessionID: "s1", Mode: store.ModeTranslate, Count: 1},
		{SessionID: "s2", Mode: store.ModeTranslate, Count: 1},
	}
	if !slices.Equal(got, want) {
		t.Errorf("CountTasksBySession = %+v, want %+v", got, want)
	}
}

// testCountTasksByDay: tasks created since, per UTC day, oldest first; a day boundary is
// midnight UTC; empty days are absent.
func testCountTasksByDay(t *testing.T, s store.Store) {
	ctx := t.Context()
	day0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i, at := range []time.Time{
		day0.Add(-time.Millisecond),               // the day before: before since, not counted
		day0.Add(10 * time.Hour),                  // day 0
		day0.Add(24*time.Hour - time.Millisecond), // day 0, last millisecond
		day0.Add(24 * time.Hour),                  // day 1, first millisecond
		day0.Add(3*24*time.Hour + time.Hour),      // day 3 (day 2 empty)
		day0.Add(3*24*time.Hour + 2*time.Hour),
		day0.Add(3*24*time.Hour + 3*time.Hour),
	} {
		tk := newTask(fmt.Sprintf("d%d", i), "principal:x")
		tk.CreatedAt = at
		must(t, s.CreateTask(ctx, tk), "CreateTask")
	}
	got, err := s.CountTasksByDay(ctx, day0)
	must(t, err, "CountTasksByDay")
	want := []store.DayCount{{Day: day0, Count: 2}, {Day: day0.Add(24 * time.Hour), Count: 1}, {Day: day0.Add(72 * time.Hour), Count: 3}}
	if len(got) != len(want) {
		t.Fatalf("CountTasksByDay = %+v, want %+v", got, want)
	}
	for i := range want {
		if !got[i].Day.Equal(want[i].Day) || got[i].Count != want[i].Count || got[i].Day.Location() != time.UTC {
			t.Errorf("CountTasksByDay[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}
