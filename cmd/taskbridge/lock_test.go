package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/internal/config"
	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/metrics"
	"github.com/taskbridge/taskbridge/internal/verify"
	"github.com/taskbridge/taskbridge/sep2663"
)

// TestServeLockDrift (issue 19, acceptance 4): verify --lock against the Go fixture
// writes the lock; the fixture then declares slow_compute's taskSupport as required, and
// serve --lock with lock_drift: refuse logs the drift naming the tool, counts it
// (taskbridge_lock_drift, lock_checks_total), shows it on /status and refuses new task
// starts with -32012 reason lock_drift naming the tool, while plain calls go on. Running
// verify --lock again against the changed upstream and reloading (SIGHUP) clears it.
func TestServeLockDrift(t *testing.T) {
	if testing.Short() {
		t.Skip("runs verify twice and the binary")
	}
	dir := t.TempDir()
	lock := filepath.Join(dir, "verified.lock")
	plan := writeFile(t, dir, "plan.yaml", verifyPlan)
	vcfg := writeFile(t, dir, "verify.yaml", apiKeysConfig)
	verifyLock := func(url string) {
		t.Helper()
		code, out, errOut := runVerifyCmd(t, "--upstream", url, "--config", vcfg, "--plan", plan, "--lock", lock)
		if code != 0 || !strings.Contains(errOut, "verify: lock written to "+lock+" (verdict pass)") {
			t.Fatalf("verify --lock: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
	}

	before := fixture.New(fixture.Options{PollIntervalMs: 100})
	srvBefore := httptest.NewServer(before)
	t.Cleanup(func() { srvBefore.Close(); before.Close() })
	verifyLock(srvBefore.URL + "/mcp")
	b, err := os.ReadFile(lock)
	if err != nil {
		t.Fatal(err)
	}
	l := string(b)
	for path, want := range map[string]string{"lockVersion": "1", "verdict": "pass", "upstream.name": "taskbridge-fixture",
		"tools.slow_compute.taskSupport": "unset", "tools.slow_compute.advertised": "optional", "protocolVersions.2025-11-25": "2025-11-25",
		"protocolVersions.2026-07-28": "2026-07-28", "upstream.extensions.#(==io.modelcontextprotocol/tasks)": "io.modelcontextprotocol/tasks"} {
		if got := gjson.Get(l, path).String(); got != want {
			t.Errorf("lock %s = %q, want %q", path, got, want)
		}
	}
	if !strings.HasPrefix(gjson.Get(l, "tools.slow_compute.annotations").Str, "sha256:") || !strings.HasPrefix(gjson.Get(l, "configuration").Str, "sha256:") {
		t.Errorf("lock hashes: %s", l)
	}

	// The upstream changes: slow_compute now declares taskSupport required.
	after := fixture.New(fixture.Options{PollIntervalMs: 100, DeclareTaskSupport: map[string]string{"slow_compute": "required"}})
	srvAfter := httptest.NewServer(after)
	t.Cleanup(func() { srvAfter.Close(); after.Close() })
	scfg := writeFile(t, dir, "serve.yaml", "lock: "+lock+"\nlock_drift: refuse\n")
	bin := buildTaskbridge(t, t.TempDir())
	s := startServe(t, bin, srvAfter.URL+"/mcp", filepath.Join(dir, "tb.db"), "--config", scfg)
	const changed = "tool slow_compute taskSupport: unset → required"
	drift := logLines(s, "lock: the upstream differs from the verified lock; run taskbridge verify --lock again, then reload")
	if len(drift) != 1 || gjson.Get(drift[0], "changed").Raw != `["`+changed+`"]` || gjson.Get(drift[0], "level").Str != "error" {
		t.Fatalf("drift log lines %q", drift)
	}
	metrics := func(drifted float64, checks map[string]float64) { // a check of -1: at least 1
		t.Helper()
		fams := scrape(t, s.admin)
		if v, ok := metricValue(fams, "taskbridge_lock_drift"); !ok || v != drifted {
			t.Errorf("taskbridge_lock_drift = %v (%v), want %v", v, ok, drifted)
		}
		for result, want := range checks {
			v, ok := metricValue(fams, "taskbridge_lock_checks_total", "result", result)
			if !ok || (want >= 0 && v != want) || (want < 0 && v < 1) {
				t.Errorf("taskbridge_lock_checks_total{result=%q} = %v (%v), want %v", result, v, ok, want)
			}
		}
	}
	metrics(1, map[string]float64{"match": 0, "drift": 1, "failed": 0})
	_, status := get(t, s.admin+"/status.json")
	if gjson.Get(status, "lock.drift.0").Str != changed || !gjson.Get(status, "lock.refusing").Bool() {
		t.Errorf("/status.json lock = %s", gjson.Get(status, "lock").Raw)
	}
	if _, page := get(t, s.admin+"/status"); !strings.Contains(page, "The upstream differs from the verified lock") || !strings.Contains(page, "slow_compute") {
		t.Error("/status shows no lock drift banner")
	}

	c := legacyClient(t, s.url, "lock-client", "1.0")
	start := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":0.2,"label":"lock"},"task":{}}`))
		return err
	}
	err = start()
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeTasksRefused || gjson.GetBytes(je.Data, "reason").Str != "lock_drift" ||
		!strings.Contains(je.Message, changed) || gjson.GetBytes(je.Data, "changed.0").Str != changed {
		t.Fatalf("a new task on the drifted upstream: %v", err)
	}
	if res := call(t, c, "tools/call", map[string]any{"name": "greet", "arguments": map[string]any{"name": "lock"}}); !strings.Contains(string(res), "Hello, lock!") {
		t.Errorf("a plain call during the drift: %s", res)
	}
	fams := scrape(t, s.admin)
	if v, _ := metricValue(fams, "taskbridge_tasks_refused_total", "reason", "lock_drift"); v != 1 {
		t.Errorf("tasks_refused_total{reason=lock_drift} = %v, want 1", v)
	}

	// Verify the changed upstream, write the lock again, reload: the drift is gone.
	verifyLock(srvAfter.URL + "/mcp")
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the lock match line after the reload", func() bool {
		return len(logLines(s, "lock: the upstream matches the verified lock")) >= 1
	})
	// The reload compares, and so does the re-probe SIGHUP starts: at least one match. The
	// router's own recheck (every 30 s on a 2026-07-28 upstream) may have compared the
	// drifted upstream again while verify ran: at least one drift.
	metrics(0, map[string]float64{"match": -1, "drift": -1, "failed": 0})
	if err := start(); err != nil {
		t.Fatalf("a new task after verify --lock and the reload: %v", err)
	}
	_, status = get(t, s.admin+"/status.json")
	if gjson.Get(status, "lock.drift.#").Int() != 0 || gjson.Get(status, "lock.refusing").Bool() {
		t.Errorf("/status.json lock after the reload = %s", gjson.Get(status, "lock").Raw)
	}
}

// TestLockWatchStates: the comparison in process. A match refuses nothing; a drift with
// refuse sets the gate's refusal; an upstream that stops answering keeps the last drift in
// force (counted as failed, the error shown); an unreadable lock is an error (a reload
// changes nothing); no lock clears everything.
func TestLockWatchStates(t *testing.T) {
	before := fixture.New(fixture.Options{})
	after := fixture.New(fixture.Options{DeclareTaskSupport: map[string]string{"greet": "forbidden"}})
	t.Cleanup(func() { before.Close(); after.Close() })
	var cur atomic.Pointer[http.Handler]
	use := func(h http.Handler) { cur.Store(&h) }
	use(before)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*cur.Load()).ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	m := metrics.New("test")
	gate := bridge.NewGate(bridge.GateConfig{Metrics: m})
	cfg := config.Default()
	up := sep2663.NewClient(sep2663.ClientOptions{URL: srv.URL + "/mcp"})
	probe, err := newLockProbe(up, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := &lockWatch{probe: probe, gate: gate, metrics: m, log: zerolog.Nop(), timeout: 5 * time.Second}
	ctx := context.Background()
	live, err := probe.live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tb.lock")
	if err := verify.WriteLock(path, live); err != nil {
		t.Fatal(err)
	}
	apply := func(path, mode string) error {
		t.Helper()
		commit, err := w.prepare(ctx, path, mode)
		if err == nil {
			commit()
		}
		return err
	}
	if err := apply(path, "refuse"); err != nil || gate.Drift() != nil || len(w.status().Drift) != 0 {
		t.Fatalf("match: %v, drift %v, status %+v", err, gate.Drift(), w.status())
	}
	use(after)
	if err := apply(path, "refuse"); err != nil || gate.Drift() == nil || !strings.Contains(gate.Drift().Message, "tool greet taskSupport: unset → forbidden") {
		t.Fatalf("drift: %v, refusal %v", err, gate.Drift())
	}
	use(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	if err := apply(path, "refuse"); err != nil || gate.Drift() == nil || w.status().Error == "" || !w.status().Refusing {
		t.Fatalf("upstream down: %v, refusal %v, status %+v", err, gate.Drift(), w.status())
	}
	if v := m.Values("lock_checks_total"); v["failed"] != 1 || v["drift"] != 1 || v["match"] != 1 {
		t.Errorf("lock_checks_total = %v", v)
	}
	if err := apply(filepath.Join(t.TempDir(), "missing.lock"), "refuse"); err == nil || gate.Drift() == nil {
		t.Fatalf("an unreadable lock: %v; the refusal must stay (%v)", err, gate.Drift())
	}
	if err := apply("", "warn"); err != nil || gate.Drift() != nil || w.status() != nil {
		t.Fatalf("no lock: %v, refusal %v, status %+v", err, gate.Drift(), w.status())
	}
}
