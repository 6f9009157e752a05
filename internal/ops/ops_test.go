package ops

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/internal/metrics"
	"github.com/taskbridge/taskbridge/internal/testenv"
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

func TestReadyzStoreGoneSQLite(t *testing.T) {
	st := openSQLite(t)
	h := Handler(Options{Store: st, Logger: zerolog.Nop(), UpstreamReady: func(context.Context) error { return nil }})
	if code, body := get(t, h, "/readyz"); code != 200 || body != "store: ok\nupstream: ok\naccepting: ok\n" {
		t.Fatalf("/readyz with everything up: %d %q", code, body)
	}
	if code, body := get(t, h, "/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	st.Close() // the store is gone
	code, body := get(t, h, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "store: FAIL unreachable") {
		t.Fatalf("/readyz with the store closed: %d %q", code, body)
	}
	if code, _ := get(t, h, "/healthz"); code != 200 {
		t.Fatalf("/healthz must stay 200 (process up) when the store is gone: %d", code)
	}
	// /status says so instead of failing blank.
	code, body = get(t, h, "/status")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "the store did not answer") {
		t.Fatalf("/status with the store gone: %d", code)
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
	h := Handler(Options{Store: st, Logger: zerolog.Nop()})
	if code, body := get(t, h, "/readyz"); code != 200 {
		t.Fatalf("/readyz on a live PostgreSQL store: %d %q", code, body)
	}
	if _, err := admin.Exec(ctx, "DROP DATABASE "+db+" WITH (FORCE)"); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, h, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "store: FAIL") {
		t.Fatalf("/readyz after the database was dropped: %d %q", code, body)
	}
}

func TestReadyzUpstreamAndDrain(t *testing.T) {
	st := openSQLite(t)
	upErr := errors.New("connection refused")
	d := NewDrain()
	m := metrics.New("test")
	h := Handler(Options{Store: st, Logger: zerolog.Nop(), Metrics: m, Drain: d, Inflight: &Inflight{},
		UpstreamReady: func(context.Context) error { return upErr }})
	code, body := get(t, h, "/readyz")
	if code != 503 || !strings.Contains(body, "upstream: FAIL not discovered") || strings.Contains(body, "refused") {
		t.Fatalf("/readyz without upstream: %d %q", code, body)
	}
	upErr = nil
	if code, _ := get(t, h, "/readyz"); code != 200 {
		t.Fatalf("/readyz once discovered: %d", code)
	}

	srv := httptest.NewServer(h)
	defer srv.Close()
	if resp, _ := http.Get(srv.URL + "/admin/drain"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /admin/drain: %d, want 405", resp.StatusCode)
	}
	resp, err := http.Post(srv.URL+"/admin/drain", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || got["draining"] != true || !d.Draining() {
		t.Fatalf("POST /admin/drain: %d %v, draining %v", resp.StatusCode, got, d.Draining())
	}
	select {
	case <-d.Started():
	default:
		t.Fatal("Started() not closed after the drain began")
	}
	if code, body := get(t, h, "/readyz"); code != 503 || !strings.Contains(body, "accepting: FAIL draining") {
		t.Fatalf("/readyz while draining: %d %q", code, body)
	}
	if v := m.Values("draining")[""]; v != 1 {
		t.Errorf("taskbridge_draining = %v, want 1", v)
	}
	if _, body := get(t, h, "/status"); !strings.Contains(body, "Draining:") {
		t.Error("/status does not show the drain")
	}
}

func TestStatusPageAndReport(t *testing.T) {
	st := openSQLite(t)
	ctx := context.Background()
	now := time.Date(2027, 5, 1, 12, 0, 0, 0, time.UTC)
	sunset := time.Date(2027, 7, 28, 0, 0, 0, 0, time.UTC)
	sessions := []store.Session{
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
	mk := func(id, sess string, mode store.Mode, status store.Status) {
		ttl := int64(3600_000)
		tk := &store.Task{ID: id, Owner: "principal:/alice", SessionID: sess, Mode: mode, Tool: "t", Status: status,
			CreatedAt: now.Add(-time.Hour), LastUpdatedAt: now, TTLMs: &ttl, Outcome: store.OutcomePending}
		if err := st.CreateTask(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	mk("t1", "s1", store.ModeTranslate, store.StatusWorking)
	mk("t2", "s2", store.ModeHost, store.StatusInputRequired)
	mk("t3", "s2", store.ModeTranslate, store.StatusCompleted)

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
