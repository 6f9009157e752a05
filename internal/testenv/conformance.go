package testenv

import (
	"context"
	"encoding/json"
	"fmt"
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

// ServerScenarios2026 are the suite's server scenarios of the 2026-07-28 revision
// (`conformance list --server --spec-version 2026-07-28`, without the extension scenarios),
// run with --spec-version 2026-07-28 so each one talks the stateless wire. A server passes
// them only with the tools, prompts and resources they call by name
// (fixture.Options.Conformance). server-stateless includes the 404-initialize check.
var ServerScenarios2026 = []string{
	"server-stateless",
	"completion-complete",
	"tools-list",
	"tools-call-simple-text",
	"tools-call-image",
	"tools-call-audio",
	"tools-call-embedded-resource",
	"tools-call-mixed-content",
	"tools-call-error",
	"tools-call-with-progress",
	"json-schema-2020-12",
	"server-sse-multiple-streams",
	"resources-list",
	"resources-read-text",
	"resources-read-binary",
	"resources-templates-read",
	"sep-2164-resource-not-found",
	"prompts-list",
	"prompts-get-simple",
	"prompts-get-with-args",
	"prompts-get-embedded-resource",
	"prompts-get-with-image",
	"dns-rebinding-protection",
	"caching",
	"http-header-validation",
	"http-custom-header-server-validation",
	"input-required-result-basic-elicitation",
	"input-required-result-basic-sampling",
	"input-required-result-basic-list-roots",
	"input-required-result-request-state",
	"input-required-result-multiple-input-requests",
	"input-required-result-multi-round",
	"input-required-result-missing-input-response",
	"input-required-result-non-tool-request",
	"input-required-result-result-type",
	"input-required-result-unsupported-methods",
	"input-required-result-tampered-state",
	"input-required-result-capability-check",
	"input-required-result-ignore-extra-params",
	"input-required-result-validate-input",
}

// Conformance configures RunConformanceWith and RunConformanceClient.
type Conformance struct {
	// SpecVersion is passed as --spec-version ("": each scenario runs at the CLI's default,
	// as the extension scenarios need).
	SpecVersion string
	// ExpectedFailures maps a scenario to why it is expected to fail. Such a scenario must
	// fail (it is logged); one that passes fails the test, so the list only ever shrinks.
	ExpectedFailures map[string]string
	// Env is added to the CLI's environment (a client command inherits it).
	Env []string
}

// RunConformance runs each scenario of the official conformance suite against the
// 2026-07-28 server at url, one CLI run per subtest, and fails a scenario on a non-zero
// exit, on any FAILURE or WARNING check in checks.json, when no check succeeded, and on a
// summary line reporting failures. (The suite also validates every message against the
// 2026-07-28 schema: check "wire-schema-valid".)
func RunConformance(t *testing.T, url string, scenarios []string) {
	t.Helper()
	RunConformanceWith(t, url, Conformance{}, scenarios)
}

// RunConformanceWith is RunConformance with options.
func RunConformanceWith(t *testing.T, url string, c Conformance, scenarios []string) {
	t.Helper()
	c.run(t, scenarios, func(sc string) []string { return []string{"server", "--url", url, "--scenario", sc} })
}

// RunConformanceClient runs each client scenario: the CLI starts the scenario's test
// server and runs command (split on spaces, the server's URL appended as the last
// argument; MCP_CONFORMANCE_SCENARIO and MCP_CONFORMANCE_CONTEXT in its environment), then
// judges what the server saw, as RunConformance does.
func RunConformanceClient(t *testing.T, command string, c Conformance, scenarios []string) {
	t.Helper()
	c.run(t, scenarios, func(sc string) []string { return []string{"client", "--command", command, "--scenario", sc} })
}

func (c Conformance) run(t *testing.T, scenarios []string, args func(sc string) []string) {
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
			a := append([]string{cli}, args(sc)...)
			if c.SpecVersion != "" {
				a = append(a, "--spec-version", c.SpecVersion)
			}
			cmd := exec.CommandContext(ctx, node, append(a, "-o", out)...)
			cmd.Env = append(append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0"), c.Env...)
			start := time.Now()
			logs, err := cmd.CombinedOutput()
			t.Logf("%s took %v", sc, time.Since(start).Round(time.Millisecond))
			problems := judge(t, out, logs, err)
			why, expected := c.ExpectedFailures[sc]
			switch {
			case expected && len(problems) == 0:
				t.Errorf("%s is listed as an expected failure (%s) but passes: take it off the list", sc, why)
			case expected:
				t.Logf("expected failure (%s): %v", why, problems)
			default:
				for _, p := range problems {
					t.Error(p)
				}
			}
			if t.Failed() {
				t.Logf("conformance output:\n%s", logs)
			}
		})
	}
}

// judge lists what failed one CLI run (see RunConformance).
func judge(t *testing.T, out string, logs []byte, runErr error) []string {
	var problems []string
	if runErr != nil {
		problems = append(problems, fmt.Sprintf("conformance CLI exited with %v", runErr))
	}
	succeeded := 0
	checks, err := readChecks(out)
	if err != nil {
		problems = append(problems, err.Error())
	}
	for _, c := range checks {
		switch c.Status {
		case "SUCCESS":
			succeeded++
		case "FAILURE", "WARNING":
			problems = append(problems, fmt.Sprintf("check %s (%s) %s: %s", c.ID, c.Name, c.Status, c.ErrorMessage))
		default:
			t.Logf("check %s: %s %s", c.ID, c.Status, c.ErrorMessage)
		}
	}
	if succeeded == 0 {
		problems = append(problems, "no check succeeded")
	}
	m := passedLine.FindSubmatch(logs)
	if m == nil || string(m[3]) != "0" || string(m[1]) != string(m[2]) {
		problems = append(problems, fmt.Sprintf("summary line: %q", m))
	}
	return problems
}

// readChecks loads every checks.json the CLI wrote under dir (-o).
func readChecks(dir string) ([]conformanceCheck, error) {
	var checks []conformanceCheck
	found := false
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
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
			return fmt.Errorf("%s: %w", p, err)
		}
		checks = append(checks, cs...)
		return nil
	})
	if err == nil && !found {
		err = fmt.Errorf("the CLI wrote no checks.json under %s", dir)
	}
	return checks, err
}
