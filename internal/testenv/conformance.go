package testenv

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// TasksScenarios are the nine active SEP-2663 scenarios of the conformance suite
// 0.2.0-alpha.12 (tasks-status-notifications is skipped by the suite itself).
var TasksScenarios = []string{
	"tasks-lifecycle",
	"tasks-capability-negotiation",
	"tasks-wire-fields",
	"tasks-request-state-removal",
	"tasks-mrtr-input",
	"tasks-request-headers",
	"tasks-dispatch-and-envelope",
	"tasks-required-task-error",
	"tasks-mrtr-composition",
}

var passedLine = regexp.MustCompile(`(?m)^Passed: (\d+)/(\d+), (\d+) failed, (\d+) warnings`)

// conformanceCheck is one entry of the checks.json the conformance CLI writes.
type conformanceCheck struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

// RunConformance runs each scenario of the official conformance suite against the
// 2026-07-28 server at url, one CLI run per subtest, and fails a scenario on a non-zero
// exit, on any FAILURE or WARNING check in checks.json, when no check succeeded, and on a
// summary line reporting failures. (The suite also validates every message against the
// 2026-07-28 schema: check "wire-schema-valid".)
func RunConformance(t *testing.T, url string, scenarios []string) {
	t.Helper()
	node := Node22(t)
	cli := filepath.Join(InteropDir(t), "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	if _, err := os.Stat(cli); err != nil {
		Missing(t, "@modelcontextprotocol/conformance is not installed in interop/node_modules")
	}
	for _, sc := range scenarios {
		t.Run(sc, func(t *testing.T) {
			out := t.TempDir()
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, cli, "server", "--url", url, "--scenario", sc, "-o", out)
			cmd.Env = append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0")
			start := time.Now()
			logs, err := cmd.CombinedOutput()
			t.Logf("%s took %v", sc, time.Since(start).Round(time.Millisecond))
			if err != nil {
				t.Errorf("conformance CLI exited with %v", err)
			}
			succeeded := 0
			for _, c := range readChecks(t, out) {
				switch c.Status {
				case "SUCCESS":
					succeeded++
				case "FAILURE", "WARNING":
					t.Errorf("check %s (%s) %s: %s", c.ID, c.Name, c.Status, c.ErrorMessage)
				default:
					t.Logf("check %s: %s %s", c.ID, c.Status, c.ErrorMessage)
				}
			}
			if succeeded == 0 {
				t.Errorf("no check succeeded")
			}
			m := passedLine.FindSubmatch(logs)
			if m == nil || string(m[3]) != "0" || string(m[1]) != string(m[2]) {
				t.Errorf("summary line: %q", m)
			}
			if t.Failed() {
				t.Logf("conformance output:\n%s", logs)
			}
		})
	}
}

// readChecks loads every checks.json the CLI wrote under dir (-o).
func readChecks(t *testing.T, dir string) []conformanceCheck {
	t.Helper()
	var checks []conformanceCheck
	found := false
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "checks.json" {
			return err
		}
		found = true
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var cs []conformanceCheck
		if err := json.Unmarshal(b, &cs); err != nil {
			t.Errorf("%s: %v", p, err)
		}
		checks = append(checks, cs...)
		return nil
	})
	if !found {
		t.Errorf("the CLI wrote no checks.json under %s", dir)
	}
	return checks
}
