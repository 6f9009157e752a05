package ops

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/internal/metrics"
	"github.com/taskbridge/taskbridge/internal/testenv"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
	"github.com/taskbridge/taskbridge/store/postgres"
	"github.com/taskbridge/taskbridge/store/sqlite"
)

func openSQLite(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "tb.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// clock is a settable time for the readiness cache.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)} }

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// readyBody decodes a /readyz answer.
type readyBody struct {
	Ready  bool     `json:"ready"`
	Failed []string `json:"failed"`
	Checks []Check  `json:"checks"`
}

func readyz(t *testing.T, h http.Handler) (int, readyBody) {
	t.Helper()
	code, body := get(t, h, "/readyz")
	var b readyBody
	if err := json.Unmarshal([]byte(body), &b); err != nil {
		t.Fatalf("/readyz body %q: %v", body, err)
	}
	return code, b
}

func (b readyBody) detail(name string) string {
	for _, c := range b.Checks {
		if c.Name == name {
			if c.OK {
				return "ok"
			}
			return c.Detail
		}
	}
	return "absent"
}

func TestReadyzStoreGoneSQLite(t *testing.T) {
	st := openSQLite(t)
	clk := newClock()
	h := Handler(Options{Store: st, Logger: zerolog.Nop(), Now: clk.now, UpstreamCheck: func(context.Context) error { return nil }})
	if code, b := readyz(t, h); code != 200 || !b.Ready || len(b.Failed) != 0 || b.detail("store") != "ok" || b.detail("upstream") != "ok" || b.detail("accepting") != "ok" {
		t.Fatalf("/readyz with everything up: %d %+v", code, b)
	}
	if code, body := get(t, h, "/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	st.Close() // the store is gone
	clk.add(DefaultCheckInterval)
	code, b := readyz(t, h)
	if code != http.StatusServiceUnavailable || b.Ready || !slices.Equal(b.Failed, []string{"store"}) || !strings.HasPrefix(b.detail("store"), "not writable: ") {
		t.Fatalf("/readyz with the store closed: %d %+v", code, b)
	}
	if code, _ := get(t, h, "/healthz"); code != 200 {
		t.Fatalf("/healthz must stay 200 (process up) when the store is gone: %d", code)
	}
	// /status says so instead of failing blank.
	code, body := get(t, h, "/status")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "the store did not answer") {
		t.Fatalf("/status with the store gone: %d", code)
	}
}

// TestReadyzStoreReadOnly: a store that answers reads but refuses writes (here a file
// opened read-only) is not ready: the check is a real write, not a ping.
func TestReadyzStoreReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tb.db")
	rw, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	rw.Close()
	ro, err := sqlite.OpenMode(context.Background(), path, sqlite.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.Ping(context.Background()); err != nil {
		t.Fatalf("the read-only store answers a ping: %v", err)
	}
	h := Handler(Options{Store: ro, Logger: zerolog.Nop()})
	code, b := readyz(t, h)
	if code != 503 || b.detail("store") != "not writable: attempt to write a readonly database (8)" {
		t.Fatalf("/readyz on a read-only store: %d %+v", code, b)
	}
}

// TestReadyzLiveUpstreamBoundedCost: the upstream is asked again once the last answer is
// older than the interval, never more often, whatever the scrape rate; a failure shows
// at once on the next check, and so does the recovery.
func TestReadyzLiveUpstreamBoundedCost(t *testing.T) {
	clk := newClock()
	var calls atomic.Int64
	var down atomic.Bool
	h := Handler(Options{Store: openSQLite(t), Logger: zerolog.Nop(), Now: clk.now, UpstreamCheck: func(context.Context) error {
		calls.Add(1)
		if down.Load() {
			return &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
		}
		return nil
	}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	scrape := func(n int) {
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				resp, err := http.Get(srv.URL + "/readyz")
				if err == nil {
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
	}
	scrape(50)
	if n := calls.Load(); n != 1 {
		t.Fatalf("50 scrapes within one interval made %d upstream checks, want 1", n)
	}
	down.Store(true)
	if code, _ := readyz(t, h); code != 200 {
		t.Fatalf("within the interval the last answer stands: %d", code)
	}
	clk.add(DefaultCheckInterval)
	code, b := readyz(t, h)
	if code != 503 || !slices.Equal(b.Failed, []string{"upstream"}) || b.detail("upstream") != "unreachable: connection refused" {
		t.Fatalf("/readyz after the upstream died: %d %+v", code, b)
	}
	if calls.Load() != 2 {
		t.Errorf("%d upstream checks, want 2", calls.Load())
	}
	down.Store(false)
	clk.add(DefaultCheckInterval)
	if code, b := readyz(t, h); code != 200 || !b.Ready {
		t.Fatalf("/readyz after the upstream came back: %d %+v", code, b)
	}
}

// TestReadyzStoreGonePostgres drops the store's database under a live pool.
func TestReadyzStoreGonePostgres(t *testing.T) {
	base := os.Getenv("TASKBRIDGE_TEST_PG")
	if base == "" {
		testenv.Missing(t, "TASKBRIDGE_TEST_PG is not set (start a server with: eval \"$(scripts/pg.sh)\")")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	b := make([]byte, 6)
	rand.Read(b)
	db := "tbops_" + hex.EncodeToString(b)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)") })
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + db
	st, err := postgres.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clk := newClock()
	h := Handler(Options{Store: st, Logger: zerolog.Nop(), Now: clk.now})
	if code, body := get(t, h, "/readyz"); code != 200 {
		t.Fatalf("/readyz on a live PostgreSQL store: %d %q", code, body)
	}
	clk.add(DefaultCheckInterval)
	if _, err := admin.Exec(ctx, "DROP DATABASE "+db+" WITH (FORCE)"); err != nil {
		t.Fatal(err)
	}
	code, rb := readyz(t, h)
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(rb.detail("store"), "not writable: ") {
		t.Fatalf("/readyz after the database was dropped: %d %+v", code, rb)
	}
}

// TestDrainUndrain: POST /admin/drain refuses new tasks and fails /readyz without ending
// the process; POST /admin/undrain puts the replica back. A drain for exit (SIGTERM,
// ?exit=true) cannot be undone.
func TestDrainUndrain(t *testing.T) {
	d := NewDrain()
	m := metrics.New("test")
	h := Handler(Options{Store: openSQLite(t), Logger: zerolog.Nop(), Metrics: m, Drain: d, Inflight: &Inflight{}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	post := func(path string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(srv.URL+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got map[string]any
		json.NewDecoder(resp.Body).Decode(&got)
		return resp.StatusCode, got
	}
	if resp, _ := http.Get(srv.URL + "/admin/drain"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /admin/drain: %d, want 405", resp.StatusCode)
	}
	code, got := post("/admin/drain")
	if code != http.StatusAccepted || got["draining"] != true || got["exiting"] != false || !d.Draining() {
		t.Fatalf("POST /admin/drain: %d %v, draining %v", code, got, d.Draining())
	}
	select {
	case <-d.Exiting():
		t.Fatal("a plain drain asked the process to exit")
	default:
	}
	if code, b := readyz(t, h); code != 503 || b.detail("accepting") != "draining" {
		t.Fatalf("/readyz while draining: %d %+v", code, b)
	}
	if v := m.Values("draining")[""]; v != 1 {
		t.Errorf("taskbridge_draining = %v, want 1", v)
	}
	if _, body := get(t, h, "/status"); !strings.Contains(body, "Draining:") {
		t.Error("/status does not show the drain")
	}

	code, got = post("/admin/undrain")
	if code != 200 || got["draining"] != false || d.Draining() {
		t.Fatalf("POST /admin/undrain: %d %v, draining %v", code, got, d.Draining())
	}
	if code, b := readyz(t, h); code != 200 || b.detail("accepting") != "ok" {
		t.Fatalf("/readyz after undrain: %d %+v", code, b)
	}
	if v := m.Values("draining")[""]; v != 0 {
		t.Errorf("taskbridge_draining after undrain = %v, want 0", v)
	}

	code, got = post("/admin/drain?exit=true")
	if code != http.StatusAccepted || got["exiting"] != true {
		t.Fatalf("POST /admin/drain?exit=true: %d %v", code, got)
	}
	select {
	case <-d.Exiting():
	default:
		t.Fatal("drain?exit=true did not ask the process to exit")
	}
	if code, got = post("/admin/undrain"); code != http.StatusConflict || !d.Draining() {
		t.Fatalf("undrain during a drain for exit: %d %v, draining %v", code, got, d.Draining())
	}
}

// TestReloadEndpoint: POST /admin/reload answers the reload's result, 422 when it was
// refused; without a reloader it does not exist.
func TestReloadEndpoint(t *testing.T) {
	ok := true
	h := Handler(Options{Logger: zerolog.Nop(), Reload: func(context.Context) (any, bool) {
		return map[string]any{"ok": ok}, ok
	}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, want := range []int{200, 422} {
		resp, err := http.Post(srv.URL+"/admin/reload", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || !strings.Contains(string(b), fmt.Sprintf(`"ok":%v`, ok)) {
			t.Errorf("POST /admin/reload: %d %s, want %d", resp.StatusCode, b, want)
		}
		ok = false
	}
	srv2 := httptest.NewServer(Handler(Options{Logger: zerolog.Nop()}))
	defer srv2.Close()
	if resp, _ := http.Post(srv2.URL+"/admin/reload", "", nil); resp.StatusCode != 404 {
		t.Errorf("POST /admin/reload without a reloader: %d, want 404", resp.StatusCode)
	}
}

func TestStatusPageAndReport(t *testing.T) {
	st := openSQLite(t)
	ctx := context.Background()
	now := time.Date(2027, 5, 1, 12, 0, 0, 0, time.UTC)
	sunset := time.Date(2027, 7, 28, 0, 0, 0, 0, time.UTC)
	sessions := []record.Session{
		{ID: "s1", ProtocolVersion: "2025-11-25", ClientInfo: json.RawMessage(`{"name":"<b>ide</b>","version":"1"}`), Principal: "/alice", CreatedAt: now.Add(-72 * time.Hour), LastSeenAt: now.Add(-time.Hour)},
		{ID: "s2", ProtocolVersion: "2025-11-25", ClientInfo: json.RawMessage(`{"name":"<b>ide</b>","version":"1"}`), Principal: "/alice", CreatedAt: now.Add(-2 * time.Hour), LastSeenAt: now.Add(-2 * time.Hour)},
		{ID: "s3", ProtocolVersion: "2025-06-18", CreatedAt: now.Add(-time.Hour), LastSeenAt: now.Add(-time.Minute)},
		{ID: "old", ProtocolVersion: "2025-11-25", ClientInfo: json.RawMessage(`{"name":"gone","version":"0"}`), CreatedAt: now.Add(-90 * 24 * time.Hour), LastSeenAt: now.Add(-60 * 24 * time.Hour)},
	}
	for i := range sessions {
		if err := st.CreateSession(ctx, &sessions[i]); err != nil {
			t.Fatal(err)
		}
	}
	mk := func(id, sess string, mode record.Mode, status record.Status) {
		ttl := int64(3600_000)
		tk := &record.Task{ID: id, Owner: "principal:/alice", SessionID: sess, Mode: mode, Tool: "t", Status: status,
			CreatedAt: now.Add(-time.Hour), LastUpdatedAt: now, TTLMs: &ttl, Outcome: record.OutcomePending}
		if err := st.CreateTask(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	mk("t1", "s1", record.ModeTranslate, record.StatusWorking)
	mk("t2", "s2", record.ModeHost, record.StatusInputRequired)
	mk("t3", "s2", record.ModeTranslate, record.StatusCompleted)

	r, err := BuildReport(ctx, st, now, 30*24*time.Hour, sunset)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Clients) != 2 || r.DaysLeft != 87 || r.InFlight["working"] != 1 || r.InFlight["input_required"] != 1 || r.TasksCreated != 3 {
		t.Fatalf("report = %+v", r)
	}
	ide := r.Clients[1]
	if r.Clients[0].Name != "(none)" || ide.Name != "<b>ide</b>" || ide.Sessions != 2 || ide.Tasks != 3 ||
		ide.ByMode["translate"] != 2 || ide.ByMode["host"] != 1 || !ide.FirstSeen.Equal(now.Add(-72*time.Hour)) || !ide.LastSeen.Equal(now.Add(-time.Hour)) {
		t.Errorf("ide row = %+v", ide)
	}

	h := Handler(Options{Store: st, Logger: zerolog.Nop(), Now: func() time.Time { return now }, Sunset: sunset,
		SunsetWarn: 90 * 24 * time.Hour, ReportWindow: 30 * 24 * time.Hour, Version: "v-test", Upstream: "http://up/mcp"})
	code, body := get(t, h, "/status")
	if code != 200 {
		t.Fatalf("/status: %d", code)
	}
	for _, want := range []string{
		"<strong>87 days</strong> until the sunset on 2027-07-28", `class="banner warn"`,
		`<td><span class="client">&lt;b&gt;ide&lt;/b&gt;</span> <span class="muted">1</span></td>`, "<td class=\"num\">2</td><td class=\"num\">3</td><td>host 1 · translate 2</td>",
		"created in the last 30 days", "1 hour ago",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/status lacks %q", want)
		}
	}
	if strings.Contains(body, "<b>ide</b>") || strings.Contains(body, "gone") || strings.Contains(body, "<script") {
		t.Error("/status shows unescaped client input, a client outside the window, or script")
	}
	_, js := get(t, h, "/status.json")
	var sj statusData
	if err := json.Unmarshal([]byte(js), &sj); err != nil || len(sj.Report.Clients) != 2 || sj.Version != "v-test" {
		t.Errorf("/status.json: %v %s", err, js)
	}
	// After the sunset the banner says so.
	h = Handler(Options{Store: st, Logger: zerolog.Nop(), Now: func() time.Time { return sunset.Add(49 * time.Hour) }, Sunset: sunset})
	if _, body := get(t, h, "/status"); !strings.Contains(body, "Sunset passed</strong> on 2027-07-28 (2 days ago)") {
		t.Error("/status after the sunset lacks the passed banner")
	}
}

func TestWaitIdle(t *testing.T) {
	busy := 3
	err := WaitIdle(context.Background(), 0, time.Millisecond, func() bool { busy--; return busy > 0 })
	if err != nil || busy > 0 {
		t.Fatalf("WaitIdle: %v, busy %d", err, busy)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := WaitIdle(ctx, time.Hour, time.Millisecond, func() bool { return true }); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitIdle on a cancelled context: %v", err)
	}
}

func TestInflightCountsPostsOnly(t *testing.T) {
	f := &Inflight{}
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	h := f.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { entered <- struct{}{}; <-release }))
	srv := httptest.NewServer(h)
	defer srv.Close()
	go http.Post(srv.URL, "", nil)
	go http.Get(srv.URL)
	<-entered
	<-entered
	if n := f.Count(); n != 1 {
		t.Errorf("in flight = %d, want 1 (the POST; GET streams are not waited for)", n)
	}
	close(release)
}

// TestStatusNoDataVersusNoTraffic: /status of a store no running bridge ever wrote to (a
// read-only one here: the page's own readiness write fails) says "no data", no evidence;
// on a store the bridge writes, it says no legacy client was seen, with the counts.
func TestStatusNoDataVersusNoTraffic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tb.db")
	rw, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	rw.Close()
	ro, err := sqlite.OpenMode(context.Background(), path, sqlite.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	now := time.Date(2027, 5, 1, 12, 0, 0, 0, time.UTC)
	h := Handler(Options{Store: ro, Logger: zerolog.Nop(), Now: func() time.Time { return now }})
	if _, body := get(t, h, "/status"); !strings.Contains(body, "<strong>No data:</strong>") || strings.Contains(body, "can be retired") {
		t.Errorf("/status of a store no bridge wrote to does not say no data")
	}
	st := openSQLite(t)
	old := now.Add(-60 * 24 * time.Hour)
	if err := st.CreateSession(context.Background(), &record.Session{ID: "s", ProtocolVersion: "2025-11-25", CreatedAt: old, LastSeenAt: old}); err != nil {
		t.Fatal(err)
	}
	h = Handler(Options{Store: st, Logger: zerolog.Nop(), Now: func() time.Time { return now }})
	if _, body := get(t, h, "/status"); !strings.Contains(body, "No legacy client was seen in this window (1 sessions and 0 tasks in the store)") {
		t.Errorf("/status with only old traffic lacks the no-traffic line")
	}
}
