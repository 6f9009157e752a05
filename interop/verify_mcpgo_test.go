package interop

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// TestVerifyMcpgoDualEra (issue 19): taskbridge verify against mcp-go v1.2.1's task server
// in its default dual-era mode (server/discover answered, tasks only on its 2025-11-25
// face). verify builds its bridge through the era router, as serve does, so it is judged
// through the routes serve gives it (legacy pass-through for 2025-11-25 clients, reverse
// for 2026-07-28 clients), not through the forward route a one-shot era check picked from
// discover alone; every gate passes.
func TestVerifyMcpgoDualEra(t *testing.T) {
	if testing.Short() {
		t.Skip("builds taskbridge and mcp-go and runs verify")
	}
	srvBin, _ := mcpgoBinaries(t)
	upstream := startMcpgoServer(t, srvBin, "-mode", "dual", "-scale", "0.5")
	bin, _ := binaries(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	plan := write("plan.yaml", "tools:\n  slow: {name: slow_compute, arguments: {seconds: 2, label: \"verify ${canary}\"}}\n"+
		"  quick: {name: greet, arguments: {name: verify}}\n"+
		"load: {concurrent: 4, pollers: 3}\nstep_timeout: 30s\n")
	cfg := write("tb.yaml", "max_concurrent_tasks: 4\nauth:\n  api_keys:\n    - {key: \"verify-mcpgo-key-0123456789\", principal: alice}\n")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "verify", "--upstream", upstream, "--config", cfg, "--plan", plan, "--json")
	cmd.Env = append(os.Environ(), "TASKBRIDGE_CONFIG=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	t.Logf("verify took %s", time.Since(start).Round(100*time.Millisecond))
	rep := out.String()
	for _, c := range gjson.Get(rep, "checks").Array() {
		t.Logf("%-13s %-40s %-7s %s", c.Get("gate").Str, c.Get("check").Str, c.Get("result").Str, c.Get("evidence").Str)
		if c.Get("result").Str == "fail" {
			t.Errorf("%s / %s failed: %s", c.Get("gate").Str, c.Get("check").Str, c.Get("evidence").Str)
		}
	}
	if err != nil || gjson.Get(rep, "verdict").Str != "pass" {
		t.Fatalf("verify: %v, verdict %q\nstderr:\n%s", err, gjson.Get(rep, "verdict").Str, errb.String())
	}
	facts := gjson.Get(rep, "facts").Raw
	if era := gjson.Get(rep, `facts.#(name=="upstream era").value`).Str; era != "2026-07-28 + 2025-11-25" {
		t.Errorf("upstream era fact %q, want both faces: %s", era, facts)
	}
	route := gjson.Get(rep, `facts.#(name=="route").value`).Str
	if !strings.Contains(route, "legacy pass-through (2025-11-25 clients)") || !strings.Contains(route, "reverse (2026-07-28 clients)") {
		t.Errorf("route fact %q, want the legacy pass-through and the reverse route (the routes serve picks)", route)
	}
}
