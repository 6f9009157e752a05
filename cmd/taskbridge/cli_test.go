package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/config"
	"github.com/taskbridge/taskbridge/internal/fixture"
)

// parseServe parses args exactly as serve does and loads the configuration.
func parseServe(t *testing.T, args ...string) (*config.Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	l := config.Register(fs)
	if _, err := parseArgs(fs, serveCommand, args, io.Discard); err != nil {
		return nil, err
	}
	return l.Load(func(string) string { return "" })
}

// TestBoolFlagForms: --kill-switch=false, --kill-switch false and their true forms mean
// what they say; the flag alone means true. Before, "--kill-switch false" turned the kill
// switch on (the false became a stray argument, silently ignored).
func TestBoolFlagForms(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--kill-switch=false"}, false},
		{[]string{"--kill-switch", "false"}, false},
		{[]string{"-kill-switch", "FALSE"}, false},
		{[]string{"--kill-switch=true"}, true},
		{[]string{"--kill-switch", "true"}, true},
		{[]string{"--kill-switch"}, true},
		{[]string{"--kill-switch", "--upstream", "http://u:9/mcp"}, true},
		{[]string{"--upstream", "http://u:9/mcp", "--kill-switch", "false", "--access-log", "false"}, false},
	} {
		c, err := parseServe(t, tc.args...)
		if err != nil || c.KillSwitch != tc.want {
			t.Errorf("serve %v: kill switch %v, err %v; want %v", tc.args, c != nil && c.KillSwitch, err, tc.want)
		}
	}
	if c, err := parseServe(t, "--access-log", "false"); err != nil || c.AccessLog {
		t.Errorf("--access-log false: %v %v", c != nil && c.AccessLog, err)
	}
}

// TestPositionalsAndFlagsInterleave: flags may follow arguments; after "--" everything is
// an argument, even what looks like a flag.
func TestPositionalsAndFlagsInterleave(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "")
	pos, err := parseArgs(fs, command{name: "x", maxArgs: -1}, []string{"a", "--json", "false", "b", "--", "-c", "--json"}, io.Discard)
	if err != nil || *asJSON || strings.Join(pos, " ") != "a b -c --json" {
		t.Errorf("parseArgs: %v %q json=%v", err, pos, *asJSON)
	}
}

// TestStrayArgumentsAreErrors: an argument a command does not take is an error naming it,
// before anything starts.
func TestStrayArgumentsAreErrors(t *testing.T) {
	db := filepath.Join(t.TempDir(), "none.db")
	for _, args := range [][]string{
		{"serve", "--upstream", "http://u:9/mcp", "stray"},
		{"serve", "--kill-switch", "maybe"},
		{"report", "--store", "sqlite:" + db, "extra"},
		{"tasks", "list", "--store", "sqlite:" + db, "extra"},
		{"tasks", "show", "a", "b", "--store", "sqlite:" + db},
		{"config", "check", "a.yaml", "b.yaml"},
		{"probe", "http://u:9/mcp", "http://v:9/mcp"},
		{"demo", "now"},
	} {
		var stderr bytes.Buffer
		err := run(context.Background(), args, io.Discard, &stderr)
		stray := args[len(args)-1]
		if args[0] == "tasks" && args[1] == "show" {
			stray = "b"
		}
		if err == nil || !strings.Contains(err.Error(), `unexpected argument "`+stray+`"`) {
			t.Errorf("taskbridge %v: err = %v, want unexpected argument %q", args, err, stray)
		}
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused command created %s", db)
	}
}

// TestHelpEverywhere: --help prints the command's help on stdout and means success
// (flag.ErrHelp, which main turns into exit 0) for every command; serve's help groups
// the settings by topic with value types and defaults.
func TestHelpEverywhere(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"help"}, {"serve", "--help"}, {"stdio", "--help"}, {"probe", "--help"}, {"config", "--help"},
		{"config", "check", "--help"}, {"tasks", "--help"}, {"tasks", "list", "--help"}, {"tasks", "show", "-h"},
		{"tasks", "reconcile", "--help"}, {"report", "--help"}, {"demo", "--help"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), args, &stdout, &stderr)
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			t.Errorf("taskbridge %v: %v (stderr %q)", args, err, stderr.String())
		}
		if !strings.Contains(stdout.String(), "taskbridge") || stdout.Len() < 100 {
			t.Errorf("taskbridge %v: help on stdout is %q", args, stdout.String())
		}
	}
	var out bytes.Buffer
	run(context.Background(), []string{"serve", "--help"}, &out, io.Discard)
	help := out.String()
	for _, want := range []string{"  Listeners:\n", "  Logs:\n", "  Retirement, kill switch and drain:\n",
		"--listen ADDR", "(default 127.0.0.1:8080)", "--heartbeat DURATION", "--kill-switch BOOL", "--store DSN",
		"--poll-floor-ms N", "--allowed-origins LIST", "--config FILE", "--auth YAML"} {
		if !strings.Contains(help, want) {
			t.Errorf("serve --help lacks %q", want)
		}
	}
	if m := regexp.MustCompile(`--[a-z-]+ value\b`).FindString(help); m != "" {
		t.Errorf("serve --help still types a flag as \"value\": %s", m)
	}
	for _, k := range config.Keys() {
		if !strings.Contains(help, "--"+config.FlagName(k)+" ") {
			t.Errorf("serve --help lacks --%s", config.FlagName(k))
		}
	}
}

// TestExitStatusBinary: the binary exits 0 on --help (config --help exited 1 before), and
// 1 for a read-only command on a missing store, saying so on stderr (acceptance 1).
func TestExitStatusBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildTaskbridge(t, t.TempDir())
	for _, args := range [][]string{{"config", "--help"}, {"serve", "--help"}, {"report", "-h"}} {
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Errorf("taskbridge %v: %v\n%s", args, err, out)
		}
	}
	dir := t.TempDir()
	for _, args := range [][]string{{"report"}, {"tasks", "list"}} {
		cmd := exec.Command(bin, append(args, "--store", "sqlite:"+filepath.Join(dir, "tb.db"))...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "no taskbridge store at sqlite:"+dir) || stdout.Len() != 0 {
			t.Errorf("taskbridge %v on a missing store: %v, stderr %q, stdout %q; want exit 1 naming the store", args, err, stderr.String(), stdout.String())
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the read-only commands created %d files", len(ents))
	}
}

// TestMisspelledEnvWarns: a TASKBRIDGE_* variable that is no setting is named in a
// warning with the closest valid one; its value is not printed.
func TestMisspelledEnvWarns(t *testing.T) {
	db := filepath.Join(t.TempDir(), "none.db")
	t.Setenv("TASKBRIDGE_STROE", "sqlite:/secret/path.db")
	var stderr bytes.Buffer
	_ = run(context.Background(), []string{"report", "--store", "sqlite:" + db}, io.Discard, &stderr)
	if want := "environment variable TASKBRIDGE_STROE is not a taskbridge setting and is ignored (did you mean TASKBRIDGE_STORE?)"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
	}
	if strings.Contains(stderr.String(), "/secret/path.db") {
		t.Error("the warning printed the variable's value")
	}
}

// TestTermSafe: control characters, escape sequences, bidi overrides and invalid UTF-8
// from peers are shown escaped; ordinary text (any script) is untouched.
func TestTermSafe(t *testing.T) {
	for in, want := range map[string]string{
		"acme-ide":                    "acme-ide",
		"Ünïcødé 名前":                  "Ünïcødé 名前",
		"evil\x1b[2J\x1b]0;pwned\x07": `evil\x1b[2J\x1b]0;pwned\x07`,
		"line\r\nbreak":               `line\x0d\x0abreak`,
		"rtl\u202egnp.exe":            `rtl\u202egnp.exe`,
		"bad\xffutf8":                 `bad\xffutf8`,
		"c1\u009bcontrol":             `c1\u009bcontrol`,
	} {
		if got := termSafe(in); got != want {
			t.Errorf("termSafe(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestConfigCheckRouteWarnings: config check names every setting given that has no
// effect on the route the upstream takes: conditionally without --connect, exactly with
// it (a 2025-11-25 upstream: warnings; a 2026-07-28 one: none). --connect opens the store
// read-only and fails, naming it, when there is none.
func TestConfigCheckRouteWarnings(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "tb.db")
	fx := fixture.New(fixture.Options{Name: "check-modern"})
	modern := httptest.NewServer(fx)
	t.Cleanup(func() { modern.Close(); fx.Close() })
	// A 2025-11-25 server in miniature: discover refused as without a session, initialize
	// answered (no tools), notifications accepted, DELETE ends the session.
	legacyUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.Method == http.MethodDelete:
		case gjson.GetBytes(body, "method").Str == "initialize":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Mcp-Session-Id", "s1")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"mini","version":"1"}}}`,
				gjson.GetBytes(body, "id").Raw)
		case r.Header.Get("Mcp-Session-Id") == "s1" && !gjson.GetBytes(body, "id").Exists():
			w.WriteHeader(http.StatusAccepted)
		default:
			http.Error(w, "Bad Request: No valid session ID provided", http.StatusBadRequest) // a 2025-11-25 server's answer to discover
		}
	}))
	t.Cleanup(legacyUp.Close)
	file := func(upstream string) string {
		p := filepath.Join(dir, "tb.yaml")
		os.WriteFile(p, []byte("upstream: "+upstream+"\nstore: sqlite:"+db+"\nmax_ttl: 1h\nhost_allow: [search]\nheartbeat: 3s\nrequest_rate: 5\n"), 0o600)
		return p
	}
	check := func(args ...string) (string, string, error) {
		var out, errb bytes.Buffer
		err := run(context.Background(), append([]string{"config", "check"}, args...), &out, &errb)
		return out.String(), errb.String(), err
	}

	p := file(modern.URL + "/mcp")
	_, stderr, err := check(p)
	if err != nil {
		t.Fatalf("config check: %v", err)
	}
	for _, want := range []string{
		p + ":3: max_ttl has no effect if the upstream speaks MCP 2025-11-25",
		p + ":4: host_allow has no effect if the upstream speaks MCP 2025-11-25",
		p + ":5: heartbeat has no effect if the upstream speaks MCP 2025-11-25",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("config check stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "max_concurrent_tasks") || strings.Contains(stderr, "request_rate") {
		t.Errorf("config check warns about a setting left at its default, or one every route applies:\n%s", stderr)
	}

	if _, _, err := check(p, "--connect"); err == nil || !strings.Contains(err.Error(), "no taskbridge store at sqlite:"+db) {
		t.Fatalf("config check --connect without a store: %v", err)
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("config check --connect created the store")
	}
	st, err := openStore(context.Background(), "sqlite:"+db)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	out, stderr, err := check(p, "--connect")
	if err != nil || strings.Contains(stderr, "has no effect") || !strings.Contains(out, "# upstream: 2025-11-25 clients get the forward route") ||
		!strings.Contains(out, "# store sqlite:"+db+": ok, read-only") {
		t.Errorf("config check --connect, modern upstream (%v):\nstdout %s\nstderr %s", err, out, stderr)
	}
	p = file(legacyUp.URL + "/mcp")
	out, stderr, err = check(p, "--connect")
	if err != nil || !strings.Contains(out, "# upstream: 2025-11-25 clients get the legacy-passthrough route") ||
		!strings.Contains(stderr, p+":3: max_ttl has no effect in front of this MCP 2025-11-25 upstream") {
		t.Errorf("config check --connect, legacy upstream (%v):\nstdout %s\nstderr %s", err, out, stderr)
	}
}
