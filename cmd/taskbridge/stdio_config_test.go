package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/taskbridge/taskbridge/internal/fixture"
)

// TestStdioConfigFile is issue 14's acceptance 5: "taskbridge stdio --config FILE" reads
// the file as serve does. With a sunset in the past, task creation over stdio is refused
// with the sunset error (a synchronous call still works); the upstream credential of the
// file reaches the upstream on every request; a listener setting in the file is warned
// about, not fatal.
func TestStdioConfigFile(t *testing.T) {
	fx := fixture.New(fixture.Options{Scale: 0.1})
	var mu sync.Mutex
	auths := map[string]int{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths[r.Header.Get("Authorization")]++
		mu.Unlock()
		fx.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { up.Close(); fx.Close() })
	bin := buildTaskbridge(t, t.TempDir())
	file := filepath.Join(t.TempDir(), "tb.yaml")
	yaml := "upstream: " + up.URL + "/mcp\n" +
		"upstream_authorization: Bearer upstream-secret-0123\n" +
		"sunset: 2020-01-01\n" +
		"listen: 127.0.0.1:9999\n" +
		"store: sqlite:" + filepath.Join(t.TempDir(), "stdio.db") + "\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startStdio(t, bin, "--config", file)
	p.initialize()
	r := p.call("tools/call", `{"name":"slow_compute","arguments":{"seconds":0},"task":{}}`)
	if r.Get("error.data.reason").Str != "sunset" || r.Get("error.data.retiredOn").Str != "2020-01-01" {
		t.Errorf("task creation over stdio after the sunset: %s, want the sunset refusal", r.Raw)
	}
	if r := p.call("tools/call", `{"name":"greet","arguments":{"name":"x"}}`); r.Get("error").Exists() {
		t.Errorf("synchronous call after the sunset: %s", r.Raw)
	}
	mu.Lock()
	defer mu.Unlock()
	if auths["Bearer upstream-secret-0123"] == 0 || len(auths) != 1 {
		t.Errorf("Authorization headers the upstream saw: %v, want only the configured credential", auths)
	}
}
