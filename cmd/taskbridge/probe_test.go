// Acceptance 3 of issue 4: "taskbridge probe URL --json" against the Go fixture, the
// fixture without the tasks extension and a legacy TS SDK v1 server prints three correct
// manifests, golden-tested. Run with -update-probe to rewrite testdata/probe/*.json.
package main

import (
	"bytes"
	"context"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
)

var updateProbe = flag.Bool("update-probe", false, "rewrite testdata/probe golden files")

func fixtureURL(t *testing.T, o fixture.Options) string {
	t.Helper()
	fx := fixture.New(o)
	srv := httptest.NewServer(fx)
	t.Cleanup(func() { srv.Close(); fx.Close() })
	return srv.URL + "/mcp"
}

func probeJSON(t *testing.T, url string, extra ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := run(ctx, append([]string{"probe", url, "--json"}, extra...), &stdout, &stderr)
	return strings.ReplaceAll(stdout.String(), url, "URL"), err
}

func TestProbeGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"fixture", func(t *testing.T) string { return fixtureURL(t, fixture.Options{Name: "probe-fixture"}) }},
		{"fixture-no-tasks", func(t *testing.T) string {
			return fixtureURL(t, fixture.Options{Name: "probe-fixture", NoTasksExtension: true})
		}},
		{"legacy-ts-sdk-v1", startLegacyServer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := probeJSON(t, tc.url(t))
			if err != nil {
				t.Fatalf("probe: %v", err)
			}
			path := filepath.Join("testdata", "probe", tc.name+".json")
			if *updateProbe {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update-probe to create it)", err)
			}
			if got != string(want) {
				t.Errorf("probe --json differs from %s:\n%s", path, got)
			}
		})
	}
}

// TestProbeManifests checks the facts a user reads in the three reports, independently of
// the golden files (so -update-probe cannot bless a wrong report).
func TestProbeManifests(t *testing.T) {
	read := func(name string) gjson.Result {
		b, err := os.ReadFile(filepath.Join("testdata", "probe", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		return gjson.ParseBytes(b)
	}
	decision := func(r gjson.Result, tool, path string) string {
		for _, d := range r.Get("decisions").Array() {
			if d.Get("tool").Str == tool {
				return d.Get(path).Str
			}
		}
		t.Fatalf("no decisions for %s", tool)
		return ""
	}
	fx := read("fixture")
	if fx.Get("manifest.era").Str != "2026-07-28" || !fx.Get("manifest.tasks").Bool() ||
		fx.Get("manifest.extensions.0").Str != "io.modelcontextprotocol/tasks" {
		t.Errorf("fixture manifest: %s", fx.Get("manifest").Raw)
	}
	if got := decision(fx, "slow_compute", "client-2025-11-25.task.decision"); got != "translate" {
		t.Errorf("fixture slow_compute legacy task: %s", got)
	}
	if got := decision(fx, "long_job", "client-2025-11-25.sync.decision"); got != "collapse" {
		t.Errorf("fixture long_job legacy sync: %s", got)
	}

	nt := read("fixture-no-tasks")
	if nt.Get("manifest.tasks").Bool() || len(nt.Get("manifest.extensions").Array()) != 0 {
		t.Errorf("no-tasks manifest: %s", nt.Get("manifest").Raw)
	}
	if got := decision(nt, "slow_compute", "client-2025-11-25.task.decision"); got != "host" {
		t.Errorf("no-tasks slow_compute legacy task: %s", got)
	}
	if got := decision(nt, "confirm_delete", "client-2025-11-25.task.error.code"); got != "" {
		t.Errorf("unexpected string code %q", got)
	}
	for _, d := range nt.Get("decisions").Array() {
		if d.Get("tool").Str == "confirm_delete" && d.Get("client-2025-11-25.task.error.code").Int() != -32014 {
			t.Errorf("no-tasks confirm_delete legacy task: %s", d.Raw)
		}
	}

	lg := read("legacy-ts-sdk-v1")
	if lg.Get("manifest.era").Str != "legacy" || lg.Get("manifest.protocolVersion").Str != "2025-11-25" ||
		!lg.Get("manifest.tasks").Bool() || lg.Get("manifest.server.name").Str != "legacy-fixture-server" {
		t.Errorf("legacy manifest: %s", lg.Get("manifest").Raw)
	}
	for tool, mode := range map[string]string{"greet": "forbidden", "slow_compute": "optional", "long_job": "required"} {
		for _, tl := range lg.Get("manifest.tools").Array() {
			if tl.Get("name").Str == tool && tl.Get("taskSupport").Str != mode {
				t.Errorf("legacy %s: mode %s, want %s", tool, tl.Get("taskSupport").Str, mode)
			}
		}
	}
	if got := decision(lg, "slow_compute", "client-2026-07-28.task.decision"); got != "translate" {
		t.Errorf("legacy slow_compute modern task: %s", got)
	}
	if got := decision(lg, "slow_compute", "client-2025-11-25.task.decision"); got != "passthrough" {
		t.Errorf("legacy slow_compute legacy task: %s", got)
	}
	// Both faces and the route per client era.
	for name, r := range map[string]gjson.Result{"fixture": fx, "legacy": lg} {
		if got, want := r.Get("routes.client-2025-11-25.route").Str+"/"+r.Get("routes.client-2026-07-28.route").Str,
			map[string]string{"fixture": "forward/modern-passthrough", "legacy": "legacy-passthrough/reverse"}[name]; got != want {
			t.Errorf("%s routes %s, want %s", name, got, want)
		}
	}
	if fx.Get("faces.legacy").Type != gjson.Null || lg.Get("faces.modern").Type != gjson.Null || !lg.Get("faces.legacy.tasks").Bool() {
		t.Errorf("faces: fixture %s, legacy %s", fx.Get("faces").Raw, lg.Get("faces").Raw)
	}
}

func TestProbeNotMCP(t *testing.T) {
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>not here</html>", http.StatusNotFound)
	}))
	defer html.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL + "/mcp"
	closed.Close()
	for _, url := range []string{html.URL + "/mcp", closedURL} {
		out, err := probeJSON(t, url)
		if err == nil || !strings.Contains(err.Error(), "does not speak MCP") {
			t.Errorf("%s: err %v, want \"does not speak MCP\"", url, err)
		}
		if out != "" {
			t.Errorf("%s: printed %q on failure", url, out)
		}
	}
	var stderr bytes.Buffer
	if err := run(context.Background(), []string{"probe"}, &bytes.Buffer{}, &stderr); err == nil {
		t.Error("probe without URL: want an error")
	}
}

// TestProbeHumanReport: the default table is compact (decisions without reasons, well
// under 120 columns); --wide has every column and the reasons.
func TestProbeHumanReport(t *testing.T) {
	url := fixtureURL(t, fixture.Options{Name: "probe-fixture", NoTasksExtension: true})
	var stdout bytes.Buffer
	if err := run(context.Background(), []string{"probe", url, "--host-deny", "slow_compute", "--wide"}, &stdout, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	for _, s := range []string{"era             2026-07-28", "tasks           false", "slow_compute", "refuse (-32014 upstream-no-tasks-host-denied)", "host (host-readonly-hint)", "HINTS"} {
		if !strings.Contains(out, s) {
			t.Errorf("--wide report lacks %q:\n%s", s, out)
		}
	}
	stdout.Reset()
	if err := run(context.Background(), []string{"probe", url, "--host-deny", "slow_compute"}, &stdout, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	out = stdout.String()
	for _, s := range []string{"TOOL", "2025-11-25 TASK", "refuse (-32014)", "--wide adds"} {
		if !strings.Contains(out, s) {
			t.Errorf("compact report lacks %q:\n%s", s, out)
		}
	}
	widest := 0
	for _, l := range strings.Split(out, "\n") {
		widest = max(widest, len(l))
	}
	if widest > 120 || strings.Contains(out, "host-readonly-hint") {
		t.Errorf("compact report is %d columns wide (or carries reasons):\n%s", widest, out)
	}
}

// TestProbeHeaders: --header (repeatable) reaches the upstream on every request of the
// probe, so an upstream behind auth can be probed; a malformed header is refused.
func TestProbeHeaders(t *testing.T) {
	fx := fixture.New(fixture.Options{Name: "probe-auth"})
	t.Cleanup(fx.Close)
	var unauthorized atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sesame" || r.Header.Get("X-Tenant") != "acme" {
			unauthorized.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		fx.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/mcp"
	if _, err := probeJSON(t, url); err == nil {
		t.Fatal("probe without the credential succeeded")
	}
	unauthorized.Store(0)
	out, err := probeJSON(t, url, "--header", "Authorization: Bearer sesame", "--header", "X-Tenant:acme")
	if err != nil || gjson.Get(out, "manifest.era").Str != "2026-07-28" || gjson.Get(out, "manifest.tools.#").Int() == 0 {
		t.Fatalf("probe with --header: %v\n%s", err, out)
	}
	if n := unauthorized.Load(); n != 0 {
		t.Errorf("%d probe requests went without the headers", n)
	}
	if _, err := probeJSON(t, url, "--header", "no colon here"); err == nil || !strings.Contains(err.Error(), "want 'NAME: VALUE'") {
		t.Errorf("a malformed --header: %v", err)
	}
}
