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

	"github.com/taskbridge/taskbridge/internal/testenv"
)

// TestVerifyTSLegacyServer (issue 19, acceptance 1, third part): taskbridge verify against
// the TS SDK v1 legacy server (legacy-server.mjs: the reverse route for 2026-07-28 clients,
// the legacy pass-through for 2025-11-25 clients) with a plan for its tools passes every
// gate, the three 2025-11-25 restart checks (a restart while working, before
// tasks/result, after a cancel), the five transport cuts and the two input checks (the
// plan's input tool is multi_input: two questions on tasks/result, cut and restarted while
// pending, re-delivered by the legacy pass-through with the same ids) included, and exits 0.
func TestVerifyTSLegacyServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds taskbridge and runs verify")
	}
	upstream := testenv.StartNodeServer(t, "legacy-server.mjs", "--port", "0")
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
		"  quick: {name: greet, arguments: {name: verify}}\n  input: {name: multi_input}\nload: {concurrent: 4, pollers: 3}\nstep_timeout: 30s\n")
	cfg := write("tb.yaml", "max_concurrent_tasks: 4\nauth:\n  api_keys:\n    - {key: \"verify-ts-key-0123456789\", principal: alice}\n")
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
		if c.Get("result").Str == "fail" {
			t.Errorf("%s / %s failed: %s", c.Get("gate").Str, c.Get("check").Str, c.Get("evidence").Str)
		}
	}
	if err != nil || gjson.Get(rep, "verdict").Str != "pass" {
		t.Fatalf("verify: %v, verdict %q\nstderr:\n%s", err, gjson.Get(rep, "verdict").Str, errb.String())
	}
	for _, check := range []string{"restart while working (2025-11-25)", "restart before tasks/result", "restart after cancel",
		"cut before CreateTaskResult (2025-11-25)", "cut after CreateTaskResult (2025-11-25)", "cut between completion and tasks/result",
		"cut after CreateTaskResult (2026-07-28)", "cut after cancel (2025-11-25)",
		"cut during input_required (2025-11-25)", "input during restart (2025-11-25)"} {
		if r := gjson.Get(rep, `checks.#(check=="`+check+`").result`).Str; r != "pass" {
			t.Errorf("recovery %q: %q, want pass", check, r)
		}
	}
	if !strings.Contains(gjson.Get(rep, `facts.#(name=="route").value`).Str, "reverse") {
		t.Errorf("route fact: %s", gjson.Get(rep, "facts").Raw)
	}
}
