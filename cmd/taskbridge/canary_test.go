package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
)

// Canaries in the upstream URL: none of them may appear anywhere but on the wire to the
// upstream itself.
const (
	canaryUser  = "canaryuser5d1"
	canaryPass  = "PASSCANARY7f3a"
	canaryToken = "TOKCANARY9e1b"
)

// canaryUpstream is the fixture behind a guard that insists on the URL's credentials (so
// the bridge really uses them) and that can be made to fail: mode 1 cuts the connection,
// mode 2 answers a non-MCP page.
type canaryUpstream struct {
	fx   http.Handler
	mode atomic.Int32
	seen atomic.Int32 // requests that carried both credentials
}

func (u *canaryUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	user, pass, _ := r.BasicAuth()
	if user != canaryUser || pass != canaryPass || r.URL.Query().Get("token") != canaryToken {
		http.Error(w, "credentials missing", http.StatusUnauthorized)
		return
	}
	u.seen.Add(1)
	switch u.mode.Load() {
	case 1:
		hj, _ := w.(http.Hijacker)
		if c, _, err := hj.Hijack(); err == nil {
			c.Close()
		}
		return
	case 2:
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html>gateway says no</html>"))
		return
	}
	u.fx.ServeHTTP(w, r)
}

// TestUpstreamCredentialsNeverLeave (issue 12, acceptance 5): a real "taskbridge serve" at
// debug level in front of an upstream URL carrying a password and a query token. After
// calls that succeed, a cut connection and a non-MCP reply (during a create, a poll and
// plain calls), the canaries appear in none of: the debug log, stdout, every store file,
// /status, /status.json, config check, tasks list/show (text and JSON), probe, and every
// reply a client got; client errors do not name the upstream's address either.
func TestUpstreamCredentialsNeverLeave(t *testing.T) {
	bin := buildTaskbridge(t, t.TempDir())
	fx := fixture.New(fixture.Options{Scale: 0.1, PollIntervalMs: 100})
	up := &canaryUpstream{fx: fx}
	srv := httptest.NewServer(up)
	t.Cleanup(func() { srv.Close(); fx.Close() })
	hostPort := strings.TrimPrefix(srv.URL, "http://")
	upURL := fmt.Sprintf("http://%s:%s@%s/mcp?token=%s", canaryUser, canaryPass, hostPort, canaryToken)
	dir := t.TempDir()
	db := filepath.Join(dir, "tb.db")
	s := startServe(t, bin, upURL, db, "--log-level", "debug", "--status-timeout", "2s")

	var seen bytes.Buffer // everything a client was told
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := legacyClient(t, s.url, "canary-client", "1.0")
	try := func(method string, params any) json.RawMessage {
		res, err := c.Call(ctx, method, params)
		fmt.Fprintf(&seen, "%s -> %s %v\n", method, res, err)
		return res
	}
	try("tools/list", map[string]any{})
	done := gjson.GetBytes(try("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 0}, "task": map[string]any{}}), "task.taskId").Str
	long := gjson.GetBytes(try("tools/call", map[string]any{"name": "long_job", "arguments": map[string]any{"seconds": 600}, "task": map[string]any{}}), "task.taskId").Str
	if done == "" || long == "" {
		t.Fatalf("tasks not created:\n%s", seen.String())
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		res := try("tasks/get", map[string]any{"taskId": done})
		if gjson.GetBytes(res, "status").Str == "completed" {
			break
		}
		if time.Now().After(deadline) {
			st := fx.Stats()
			t.Fatalf("the quick task did not complete: %s\nfixture: methods %v executions %v taskGets %v\nguard saw %d", res, st.Methods, st.Executions, st.TaskGets, up.seen.Load())
		}
	}
	try("tasks/result", map[string]any{"taskId": done})

	var failedCreate string
	for _, mode := range []int32{1, 2} {
		up.mode.Store(mode)
		try("tools/list", map[string]any{})
		try("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}})
		res := try("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 0}, "task": map[string]any{}})
		if id := gjson.GetBytes(res, "task.taskId").Str; id != "" {
			failedCreate = id
		}
		time.Sleep(300 * time.Millisecond) // the long task's poller fails against it too
		try("tasks/get", map[string]any{"taskId": long})
	}
	up.mode.Store(0)
	try("tasks/cancel", map[string]any{"taskId": long})
	if !strings.Contains(seen.String(), "upstream unavailable") || !strings.Contains(seen.String(), "invalid upstream reply") {
		t.Errorf("clients were not told the class of the failures:\n%s", seen.String())
	}
	if strings.Contains(seen.String(), hostPort) {
		t.Errorf("a client was told the upstream's address %s:\n%s", hostPort, seen.String())
	}
	if up.seen.Load() == 0 {
		t.Fatal("the upstream never saw the URL's credentials: the test proves nothing")
	}

	places := map[string]string{"client replies": seen.String()}
	_, places["/status"] = get(t, s.admin+"/status")
	_, places["/status.json"] = get(t, s.admin+"/status.json")
	runOut := func(args ...string) string {
		var out, errb bytes.Buffer
		err := run(context.Background(), args, &out, &errb)
		return fmt.Sprintf("%s\n%s\n%v", out.String(), errb.String(), err)
	}
	places["tasks list"] = runOut("tasks", "list", "--store", "sqlite:"+db)
	places["tasks list --json"] = runOut("tasks", "list", "--json", "--store", "sqlite:"+db)
	for _, id := range []string{done, long, failedCreate} {
		if id != "" {
			places["tasks show "+id] = runOut("tasks", "show", id, "--store", "sqlite:"+db)
			places["tasks show --json "+id] = runOut("tasks", "show", id, "--json", "--store", "sqlite:"+db)
		}
	}
	cfgFile := filepath.Join(dir, "tb.yaml")
	os.WriteFile(cfgFile, []byte("upstream: "+upURL+"\nstore: sqlite:"+db+"\n"), 0o600)
	places["config check"] = runOut("config", "check", cfgFile)
	places["config check (bad upstream)"] = runOut("config", "check", writeFile(t, dir, "bad.yaml",
		"upstream: ftp://"+canaryUser+":"+canaryPass+"@"+hostPort+"/mcp?token="+canaryToken+"\n"))
	places["probe"] = runOut("probe", upURL)
	places["probe --json"] = runOut("probe", upURL, "--json")
	up.mode.Store(1)
	places["probe (upstream failing)"] = runOut("probe", upURL)
	up.mode.Store(0)
	if !strings.Contains(places["tasks show "+done], "http://"+hostPort+"/mcp") {
		t.Errorf("tasks show does not name the upstream in its redacted form:\n%s", places["tasks show "+done])
	}

	// The process's own output: stop it so the log is complete, then read the store files.
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exit:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit on SIGINT")
	}
	places["serve log (debug)"] = s.log.String()
	if !strings.Contains(places["serve log (debug)"], `"level":"debug"`) {
		t.Fatal("the serve log has no debug lines: the test would prove nothing")
	}
	files, _ := filepath.Glob(db + "*")
	for _, f := range files {
		b, _ := os.ReadFile(f)
		places["store file "+filepath.Base(f)] = string(b)
	}
	for where, text := range places {
		for _, canary := range []string{canaryPass, canaryToken, canaryUser, url.QueryEscape(canaryToken)} {
			if strings.Contains(text, canary) {
				i := strings.Index(text, canary)
				t.Errorf("%s carries the canary %q: …%s…", where, canary, text[max(0, i-120):min(len(text), i+60)])
			}
		}
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
