package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskbridge/taskbridge/internal/testenv"
)

// revScenarios are the server scenarios the conformance suite 0.2.0-alpha.12 runs for
// `--requirements 2026-07-28`: the revision's base scenarios (404-initialize is a check of
// server-stateless), its pending ones (json-schema-2020-12, http-header-validation,
// http-custom-header-server-validation) and the tasks extension's. A scenario the pinned
// suite adds or drops fails TestReverseConformance until this list says so.
var revScenarios = []string{
	"server-stateless", "completion-complete", "tools-list",
	"tools-call-simple-text", "tools-call-image", "tools-call-audio", "tools-call-embedded-resource",
	"tools-call-mixed-content", "tools-call-error", "tools-call-with-progress",
	"json-schema-2020-12", "server-sse-multiple-streams",
	"resources-list", "resources-read-text", "resources-read-binary", "resources-templates-read",
	"sep-2164-resource-not-found",
	"prompts-list", "prompts-get-simple", "prompts-get-with-args", "prompts-get-embedded-resource", "prompts-get-with-image",
	"dns-rebinding-protection", "caching", "http-header-validation", "http-custom-header-server-validation",
	"input-required-result-basic-elicitation", "input-required-result-basic-sampling",
	"input-required-result-basic-list-roots", "input-required-result-request-state",
	"input-required-result-multiple-input-requests", "input-required-result-multi-round",
	"input-required-result-missing-input-response", "input-required-result-non-tool-request",
	"input-required-result-result-type", "input-required-result-unsupported-methods",
	"input-required-result-tampered-state", "input-required-result-capability-check",
	"input-required-result-ignore-extra-params", "input-required-result-validate-input",
	"tasks-lifecycle", "tasks-capability-negotiation", "tasks-wire-fields", "tasks-request-state-removal",
	"tasks-mrtr-input", "tasks-request-headers", "tasks-dispatch-and-envelope", "tasks-status-notifications",
	"tasks-required-task-error", "tasks-mrtr-composition",
}

// revExpectedFailures are the scenarios that fail through the reverse route, each with why.
// An entry that starts passing fails the test: remove it then.
var revExpectedFailures = map[string]string{
	// (input-required-result-capability-check passes since the upstream sessions declare the
	// caller's capabilities: issue 16 item 6.)
}

// revSkippedBySuite are the scenarios the suite itself skips (every check SKIPPED).
var revSkippedBySuite = map[string]bool{"tasks-status-notifications": true}

// TestReverseConformance runs every 2026-07-28 server scenario of the official conformance
// suite (and the tasks extension's) against taskbridge's modern face in front of the TS SDK
// v1 legacy server (legacy-server.mjs with conformance-fixture.mjs), in one CLI run (issue 16
// acceptance 2, the reverse route). A scenario passes with no FAILURE or WARNING check and
// at least one SUCCESS; revExpectedFailures must fail, and nothing else may. The CLI checks
// the same baseline (--expected-failures) and must exit 0.
func TestReverseConformance(t *testing.T) {
	e := newReverseEnv(t)
	for sc := range revExpectedFailures {
		if !slices.Contains(revScenarios, sc) || revSkippedBySuite[sc] {
			t.Fatalf("expected failure %s is not a scenario of the run", sc)
		}
	}
	checks, logs, err := runSuite(t, e.url, "2026-07-28", revExpectedFailures)
	if err != nil {
		t.Errorf("conformance CLI: %v (it exits non-zero on an unexpected failure or a stale baseline entry)", err)
	}
	for sc := range checks {
		if !slices.Contains(revScenarios, sc) {
			t.Errorf("the suite ran %s, which revScenarios does not name", sc)
		}
	}
	for _, sc := range revScenarios {
		t.Run(sc, func(t *testing.T) {
			cs, ran := checks[sc]
			if !ran {
				t.Fatalf("the suite did not run %s", sc)
			}
			bad, succeeded := failing(cs)
			reason, expected := revExpectedFailures[sc]
			switch {
			case revSkippedBySuite[sc]:
				if succeeded > 0 || len(bad) > 0 || len(cs) == 0 {
					t.Errorf("the suite skipped %s until now; it ran: %+v", sc, cs)
				}
			case expected && len(bad) == 0:
				t.Errorf("%s passes now (expected to fail: %s): remove it from revExpectedFailures", sc, reason)
			case expected:
				t.Logf("expected failure (%s): %s", reason, strings.Join(bad, "; "))
			default:
				for _, b := range bad {
					t.Error(b)
				}
				if succeeded == 0 {
					t.Error("no check succeeded")
				}
			}
		})
	}
	if t.Failed() {
		t.Logf("conformance output:\n%s", logs)
	}
}

// suiteCheck is one entry of a checks.json the conformance CLI writes.
type suiteCheck struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

// failing lists the FAILURE and WARNING checks and counts the SUCCESS ones.
func failing(cs []suiteCheck) (bad []string, succeeded int) {
	for _, c := range cs {
		switch c.Status {
		case "SUCCESS":
			succeeded++
		case "FAILURE", "WARNING":
			bad = append(bad, fmt.Sprintf("check %s %s: %s", c.ID, c.Status, c.ErrorMessage))
		}
	}
	return bad, succeeded
}

// resultDir is a scenario's output directory: server-<scenario>-<timestamp>.
var resultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$`)

// runSuite runs the conformance CLI once with --requirements (every scenario a revision
// requires, each with its own checks.json) and the expected failures as its baseline, and
// returns each scenario's checks.
func runSuite(t *testing.T, url, requirements string, expected map[string]string) (map[string][]suiteCheck, []byte, error) {
	t.Helper()
	node := testenv.Node22(t)
	cli := filepath.Join(testenv.InteropDir(t), "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	if _, err := os.Stat(cli); err != nil {
		testenv.Missing(t, "@modelcontextprotocol/conformance is not installed in interop/node_modules")
	}
	dir := t.TempDir()
	baseline := filepath.Join(dir, "baseline.yml")
	var b strings.Builder
	b.WriteString("server:\n")
	for sc := range expected {
		fmt.Fprintf(&b, "  - %s\n", sc)
	}
	if len(expected) == 0 {
		b.Reset()
		b.WriteString("server: []\n")
	}
	if err := os.WriteFile(baseline, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, cli, "server", "--url", url, "--requirements", requirements,
		"--expected-failures", baseline, "-o", out)
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0")
	start := time.Now()
	logs, runErr := cmd.CombinedOutput()
	t.Logf("conformance --requirements %s took %v", requirements, time.Since(start).Round(time.Millisecond))
	checks := map[string][]suiteCheck{}
	err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "checks.json" {
			return err
		}
		m := resultDir.FindStringSubmatch(filepath.Base(filepath.Dir(p)))
		if m == nil {
			return fmt.Errorf("unexpected result directory %s", p)
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var cs []suiteCheck
		if err := json.Unmarshal(raw, &cs); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		checks[m[1]] = append(checks[m[1]], cs...)
		return nil
	})
	if err != nil {
		t.Errorf("reading the CLI's results: %v\n%s", err, logs)
	}
	return checks, logs, runErr
}
