package storetest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

// testListSessions: sessions seen at or after since, most recently seen first, every
// field round-tripped; TouchSession moves a session up.
func testListSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	for i, id := range []string{"old", "mid", "new"} {
		se := &record.Session{ID: id, ProtocolVersion: "2025-11-25",
			ClientInfo: json.RawMessage(fmt.Sprintf(`{"name":"client-%d","version":"1.%d"}`, i, i)),
			Principal:  "p" + id, CreatedAt: base.Add(time.Duration(i) * time.Hour), LastSeenAt: base.Add(time.Duration(i) * time.Hour)}
		must(t, s.CreateSession(ctx, se), "CreateSession")
	}
	ids := func(ss []*record.Session) []string {
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
	mk := func(id, owner string, st record.Status, at int) {
		tk := newTask(id, owner)
		tk.Status, tk.CreatedAt = st, base.Add(time.Duration(at)*time.Minute)
		must(t, s.CreateTask(ctx, tk), "CreateTask "+id)
	}
	mk("t1", "principal:alice", record.StatusWorking, 1)
	mk("t2", "principal:bob", record.StatusCompleted, 2)
	mk("t3", "principal:alice", record.StatusCompleted, 3)
	mk("t4", "principal:alice", record.StatusWorking, 4)
	ids := func(ts []*record.Task) []string {
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
		{store.TaskQuery{Status: record.StatusCompleted}, []string{"t3", "t2"}},
		{store.TaskQuery{Owner: "principal:alice", Status: record.StatusWorking, Limit: 1}, []string{"t4"}},
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
	want.Status, want.CreatedAt, want.Version = record.StatusCompleted, base.Add(2*time.Minute), 1
	checkTask(t, normTask(want), got[0], "QueryTasks row")
}

// testCountTasksBySession: counts per (session, mode) for tasks created since.
func testCountTasksBySession(t *testing.T, s store.Store) {
	ctx := t.Context()
	mk := func(id, sess string, mode record.Mode, at int) {
		tk := newTask(id, "principal:x")
		tk.SessionID, tk.Mode, tk.CreatedAt = sess, mode, base.Add(time.Duration(at)*time.Minute)
		must(t, s.CreateTask(ctx, tk), "CreateTask "+id)
	}
	mk("a", "s1", record.ModeTranslate, 0)
	mk("b", "s1", record.ModeTranslate, 5)
	mk("c", "s1", record.ModeHost, 6)
	mk("d", "s2", record.ModeTranslate, 7)
	got, err := s.CountTasksBySession(ctx, base.Add(time.Minute))
	must(t, err, "CountTasksBySession")
	want := []store.SessionTaskCount{
		{SessionID: "s1", Mode: record.ModeHost, Count: 1},
		{SessionID: "s1", Mode: record.ModeTranslate, Count: 1},
		{SessionID: "s2", Mode: record.ModeTranslate, Count: 1},
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

// testSummarizeClients: sessions seen since, grouped by clientInfo name and version (read
// as gjson reads them: strings only, the first of a duplicated member), protocol version
// and principal, with first/last seen, session counts and their tasks by mode.
func testSummarizeClients(t *testing.T, s store.Store) {
	ctx := t.Context()
	since := base.Add(time.Hour)
	type sess struct {
		id, info, proto, principal string
		created, seen              time.Duration
	}
	for _, se := range []sess{
		{"a1", `{"name":"claude","version":"1.0","icons":[]}`, "2025-11-25", "acme/alice", 0, 2 * time.Hour},
		{"a2", `{"version":"1.0","name":"claude"}`, "2025-11-25", "acme/alice", 90 * time.Minute, 3 * time.Hour},
		{"b1", `{"name":"claude","version":"1.0"}`, "2025-11-25", "acme/bob", 2 * time.Hour, 2 * time.Hour},
		{"c1", ``, "2025-06-18", "", 2 * time.Hour, 2 * time.Hour},
		{"c2", `{"name":7,"version":["x"]}`, "2025-06-18", "", 3 * time.Hour, 4 * time.Hour},
		{"c3", `{"name":"","version":"2"}`, "2025-06-18", "", 3 * time.Hour, 4 * time.Hour},
		{"d1", `{"name":"first","name":"second","version":"\u00e9 <&>"}`, "2025-11-25", "", 2 * time.Hour, 2 * time.Hour},
		{"old", `{"name":"claude","version":"1.0"}`, "2025-11-25", "acme/alice", 0, 30 * time.Minute},
	} {
		must(t, s.CreateSession(ctx, &record.Session{ID: se.id, ProtocolVersion: se.proto, ClientInfo: rawOrNil(se.info),
			Principal: se.principal, CreatedAt: base.Add(se.created), LastSeenAt: base.Add(se.seen)}), "CreateSession "+se.id)
	}
	for i, tk := range []struct {
		sess string
		mode record.Mode
		at   time.Duration
	}{
		{"a1", record.ModeTranslate, 2 * time.Hour}, {"a2", record.ModeTranslate, 2 * time.Hour},
		{"a2", record.ModeHost, 2 * time.Hour}, {"a1", record.ModeTranslate, 0}, // before since: not counted
		{"c1", record.ModeComplete, 3 * time.Hour}, {"old", record.ModeTranslate, 2 * time.Hour}, // session outside the window
	} {
		x := newTask(fmt.Sprintf("t%d", i), "o")
		x.SessionID, x.Mode, x.CreatedAt, x.RequestID = tk.sess, tk.mode, base.Add(tk.at), fmt.Sprintf("%d", i)
		must(t, s.CreateTask(ctx, x), "CreateTask")
	}
	got, err := s.SummarizeClients(ctx, since)
	must(t, err, "SummarizeClients")
	slices.SortFunc(got, func(a, b store.ClientSummary) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Version, b.Version), strings.Compare(a.Principal, b.Principal))
	})
	at := func(d time.Duration) time.Time { return ms(base.Add(d)) }
	want := []store.ClientSummary{
		{Name: "", Version: "", ProtocolVersion: "2025-06-18", FirstSeen: at(2 * time.Hour), LastSeen: at(4 * time.Hour), Sessions: 2,
			Tasks: map[record.Mode]int{record.ModeComplete: 1}},
		{Name: "", Version: "2", ProtocolVersion: "2025-06-18", FirstSeen: at(3 * time.Hour), LastSeen: at(4 * time.Hour), Sessions: 1,
			Tasks: map[record.Mode]int{}},
		{Name: "claude", Version: "1.0", ProtocolVersion: "2025-11-25", Principal: "acme/alice", FirstSeen: at(0), LastSeen: at(3 * time.Hour),
			Sessions: 2, Tasks: map[record.Mode]int{record.ModeTranslate: 2, record.ModeHost: 1}},
		{Name: "claude", Version: "1.0", ProtocolVersion: "2025-11-25", Principal: "acme/bob", FirstSeen: at(2 * time.Hour), LastSeen: at(2 * time.Hour),
			Sessions: 1, Tasks: map[record.Mode]int{}},
		{Name: "first", Version: "é <&>", ProtocolVersion: "2025-11-25", FirstSeen: at(2 * time.Hour), LastSeen: at(2 * time.Hour), Sessions: 1,
			Tasks: map[record.Mode]int{}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SummarizeClients:\n got %+v\nwant %+v", got, want)
	}
	// The rule is gjson's: the report read the raw clientInfo with it before.
	if n := gjson.Get(`{"name":"first","name":"second"}`, "name").Str; n != "first" {
		t.Fatalf("gjson reads a duplicated member as %q", n)
	}
	n, err := s.CountTasksSince(ctx, since)
	must(t, err, "CountTasksSince")
	if n != 5 {
		t.Errorf("CountTasksSince = %d, want 5", n)
	}
}

// testPurgeSessions: sessions last seen before the cut go, closed or not; the rest and
// every task stay; a second run finds nothing.
func testPurgeSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, se := range []struct {
		id     string
		seen   time.Duration
		closed bool
	}{{"idle", -2 * time.Hour, false}, {"closed", -2 * time.Hour, true}, {"recent", -30 * time.Minute, false},
		{"recent-closed", -30 * time.Minute, true}, {"edge", -time.Hour, false}} {
		must(t, s.CreateSession(ctx, &record.Session{ID: se.id, ProtocolVersion: "2025-11-25", CreatedAt: base.Add(-3 * time.Hour),
			LastSeenAt: base.Add(se.seen)}), "CreateSession")
		if se.closed {
			must(t, s.CloseSession(ctx, se.id), "CloseSession")
		}
	}
	tk := newTask("t1", "session:idle")
	tk.SessionID = "idle"
	must(t, s.CreateTask(ctx, tk), "CreateTask")
	n, err := s.PurgeSessions(ctx, base.Add(-time.Hour))
	must(t, err, "PurgeSessions")
	if n != 2 {
		t.Errorf("PurgeSessions = %d, want 2", n)
	}
	for _, id := range []string{"idle", "closed"} {
		_, err := s.GetSession(ctx, id)
		wantErr(t, err, store.ErrNotFound, "GetSession("+id+") after the purge")
	}
	for _, id := range []string{"recent", "recent-closed", "edge"} {
		_, err := s.GetSession(ctx, id)
		must(t, err, "GetSession("+id+") after the purge")
	}
	if _, err := s.GetTask(ctx, "t1"); err != nil {
		t.Errorf("the task of a purged session: %v, want it kept", err)
	}
	if n, err := s.PurgeSessions(ctx, base.Add(-time.Hour)); err != nil || n != 0 {
		t.Errorf("second PurgeSessions = %d, %v; want 0", n, err)
	}
}

func rawOrNil(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// testSummarizeClientDays: the distinct (client, first UTC day, last UTC day) of the
// sessions last seen since; duplicates folded, a session seen before since left out.
func testSummarizeClientDays(t *testing.T, s store.Store) {
	ctx := t.Context()
	day0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, se := range []struct {
		id, info      string
		created, seen time.Time
	}{
		{"a1", `{"name":"a","version":"1"}`, day0.Add(10 * time.Hour), day0.Add(53 * time.Hour)},
		{"a2", `{"version":"1","name":"a"}`, day0.Add(11 * time.Hour), day0.Add(49 * time.Hour)}, // same days as a1
		{"a3", `{"name":"a","version":"1"}`, day0.Add(24 * time.Hour), day0.Add(48*time.Hour - time.Millisecond)},
		{"b1", ``, day0.Add(-time.Hour), day0.Add(time.Hour)},
		{"gone", `{"name":"a","version":"1"}`, day0.Add(-48 * time.Hour), day0.Add(-time.Millisecond)},
	} {
		must(t, s.CreateSession(ctx, &record.Session{ID: se.id, ProtocolVersion: "2025-11-25", ClientInfo: rawOrNil(se.info),
			CreatedAt: se.created, LastSeenAt: se.seen}), "CreateSession "+se.id)
	}
	got, err := s.SummarizeClientDays(ctx, day0)
	must(t, err, "SummarizeClientDays")
	slices.SortFunc(got, func(a, b store.ClientDays) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), a.First.Compare(b.First), a.Last.Compare(b.Last))
	})
	d := func(n int) time.Time { return day0.AddDate(0, 0, n) }
	want := []store.ClientDays{
		{ProtocolVersion: "2025-11-25", First: d(-1), Last: d(0)},
		{Name: "a", Version: "1", ProtocolVersion: "2025-11-25", First: d(0), Last: d(2)},
		{Name: "a", Version: "1", ProtocolVersion: "2025-11-25", First: d(1), Last: d(1)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SummarizeClientDays:\n got %+v\nwant %+v", got, want)
	}
}

// testSummary: an empty store says so (zero sessions, zero time); then every session and
// task counts whatever its age, and the last session seen is the latest touch.
func testSummary(t *testing.T, s store.Store) {
	ctx := t.Context()
	sum, err := s.Summary(ctx)
	must(t, err, "Summary of an empty store")
	if sum != (store.Summary{}) {
		t.Fatalf("Summary of an empty store = %+v, want zero", sum)
	}
	for i, id := range []string{"a", "b"} {
		at := base.Add(time.Duration(i) * time.Hour)
		must(t, s.CreateSession(ctx, &record.Session{ID: id, ProtocolVersion: "2025-11-25", CreatedAt: at, LastSeenAt: at}), "CreateSession")
	}
	must(t, s.TouchSession(ctx, "a", base.Add(5*time.Hour)), "TouchSession")
	for _, id := range []string{"t1", "t2", "t3"} {
		must(t, s.CreateTask(ctx, newTask(id, "session:a")), "CreateTask")
	}
	sum, err = s.Summary(ctx)
	must(t, err, "Summary")
	if sum.Sessions != 2 || sum.Tasks != 3 || !sum.LastSessionSeen.Equal(ms(base.Add(5*time.Hour))) || sum.LastSessionSeen.Location() != time.UTC {
		t.Errorf("Summary = %+v, want 2 sessions, 3 tasks, last seen %v", sum, ms(base.Add(5*time.Hour)))
	}
	if !sum.Heartbeat.IsZero() {
		t.Errorf("Summary.Heartbeat = %v before any CheckWritable, want zero", sum.Heartbeat)
	}
	before := time.Now().Add(-time.Second)
	must(t, s.CheckWritable(ctx), "CheckWritable")
	sum, err = s.Summary(ctx)
	must(t, err, "Summary after CheckWritable")
	if sum.Heartbeat.Before(before) || sum.Heartbeat.After(time.Now().Add(time.Second)) || sum.Heartbeat.Location() != time.UTC {
		t.Errorf("Summary.Heartbeat = %v, want about now (UTC)", sum.Heartbeat)
	}
}

// testCheckWritable: the heartbeat write succeeds on a writable store, again and again.
func testCheckWritable(t *testing.T, s store.Store) {
	for i := range 3 {
		must(t, s.CheckWritable(t.Context()), fmt.Sprintf("CheckWritable #%d", i+1))
	}
}
