package interop

// The conformance suite's 2026-07-28 client scenarios with the bridge as the client under
// test: the CLI starts a scenario's test server and runs this test binary as the client
// command (TestMain sees driverEnv); the driver starts "taskbridge serve" with that server
// as its upstream and drives a 2025-11-25 client (TS SDK v1, legacy-client.mjs) through
// it, so every request the scenario judges is one the bridge sent upstream for it.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/testenv"
)

// driverEnv carries the driver's settings (driverConfig as JSON) from the test to the
// command the CLI runs; its presence turns the test binary into the driver.
const driverEnv = "TASKBRIDGE_CONFORMANCE_DRIVER"

type driverConfig struct {
	Taskbridge string `json:"taskbridge"`
	Node       string `json:"node"`
	Dir        string `json:"dir"` // interop/, where legacy-client.mjs is
}

func TestMain(m *testing.M) {
	if cfg := os.Getenv(driverEnv); cfg != "" {
		os.Exit(driveConformanceClient(cfg, os.Args[len(os.Args)-1]))
	}
	os.Exit(m.Run())
}

// clientScenarios2026 are the 2026-07-28 client scenarios the bridge's upstream client is
// held to, and clientExpectedFailures the ones expected to fail (none).
var (
	clientScenarios2026 = []string{
		"request-metadata",
		"tools_call",
		"http-standard-headers",
		"http-custom-headers",
		"http-invalid-tool-headers",
		"sep-2322-client-request-state",
	}
	clientExpectedFailures = map[string]string{}
)

// TestConformanceClientScenarios: for each scenario the bridge, in front of the
// scenario's server, is the 2026-07-28 client: request-metadata (MCP-Protocol-Version and
// _meta with protocolVersion, clientCapabilities and clientInfo on every POST, a retry
// after -32022), tools_call, http-standard-headers (Mcp-Method, Mcp-Name),
// http-custom-headers (Mcp-Param-* mirroring and encoding), http-invalid-tool-headers
// (tools with invalid x-mcp-header left out of tools/list, the valid one kept) and
// sep-2322-client-request-state (requestState echoed exactly, omitted when absent, fresh
// JSON-RPC ids, no state carried to another call).
func TestConformanceClientScenarios(t *testing.T) {
	bin, _ := binaries(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(driverConfig{Taskbridge: bin, Node: testenv.Node22(t), Dir: testenv.InteropDir(t)})
	testenv.RunConformanceClient(t, self, testenv.Conformance{
		SpecVersion:      "2026-07-28",
		ExpectedFailures: clientExpectedFailures,
		Env:              []string{driverEnv + "=" + string(cfg)},
	}, clientScenarios2026)
}

// driveConformanceClient is the client command: it runs the scenario's flows through a
// bridge in front of upstream and returns the exit code (non-zero only when a step could
// not run at all; what the upstream saw is the scenario's to judge).
func driveConformanceClient(cfgJSON, upstream string) int {
	var cfg driverConfig
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	url, stop, err := startServe(ctx, cfg.Taskbridge, upstream)
	if err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		return 2
	}
	defer stop()
	lc := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, cfg.Node, append([]string{"legacy-client.mjs", "--url", url}, args...)...)
		cmd.Dir = cfg.Dir
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
		err := cmd.Run()
		fmt.Fprintf(os.Stderr, "legacy-client %s: %s\n", strings.Join(args, " "), strings.TrimSpace(out.String()))
		return out.String(), err
	}
	for _, step := range driverSteps(os.Getenv("MCP_CONFORMANCE_SCENARIO"), os.Getenv("MCP_CONFORMANCE_CONTEXT"), lc) {
		if err := step(); err != nil {
			fmt.Fprintln(os.Stderr, "driver:", err)
			return 1
		}
	}
	return 0
}

// driverSteps are the legacy client's flows for one scenario: each scenario's server
// judges the upstream requests these make the bridge send.
func driverSteps(scenario, contextJSON string, lc func(...string) (string, error)) []func() error {
	call := func(tool, args string) func() error {
		return func() error { _, err := lc("--flow", "sync", "--tool", tool, "--args", args); return err }
	}
	list := func() error { _, err := lc("--flow", "tools"); return err }
	switch scenario {
	case "request-metadata":
		return []func() error{list, call("greet", `{}`)}
	case "tools_call":
		return []func() error{list, call("add_numbers", `{"a":1,"b":2}`)}
	case "http-standard-headers":
		return []func() error{list, call("test_headers", `{}`), call("my-hyphenated-tool", `{}`)}
	case "http-custom-headers":
		var steps []func() error
		for _, c := range gjson.Get(contextJSON, "toolCalls").Array() {
			steps = append(steps, call(c.Get("name").Str, c.Get("arguments").Raw))
		}
		return steps
	case "http-invalid-tool-headers":
		// Call every tool the bridge lists: one with an invalid x-mcp-header must not be there.
		return []func() error{func() error {
			out, err := lc("--flow", "tools")
			if err != nil {
				return err
			}
			for _, tl := range gjson.Get(lastLine(out), "tools.#.name").Array() {
				if err := call(tl.Str, `{"region":"us-west1"}`)(); err != nil {
					return err
				}
			}
			return nil
		}}
	case "sep-2322-client-request-state":
		var steps []func() error
		for _, tl := range []string{"test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_unrelated", "test_mrtr_no_result_type"} {
			steps = append(steps, call(tl, `{}`))
		}
		return steps
	}
	return []func() error{func() error { return fmt.Errorf("no flows for scenario %q", scenario) }}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// startServe runs "taskbridge serve" in front of upstream and returns its MCP URL and a
// stop function that ends it and waits for it.
func startServe(ctx context.Context, bin, upstream string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "taskbridge-conformance-client-")
	if err != nil {
		return "", nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--admin", "off", "--upstream", upstream,
		"--store", "sqlite:"+filepath.Join(dir, "tasks.db"), "--log-format", "json")
	stderr, banner := testenv.WatchServeLog(logf)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	stop := func() {
		cmd.Process.Kill()
		<-exited
		if b, err := os.ReadFile(filepath.Join(dir, "serve.log")); err == nil {
			os.Stderr.Write(b)
		}
		os.RemoveAll(dir)
	}
	select {
	case b := <-banner:
		return b.MCP, stop, nil
	case <-exited:
		stop()
		return "", nil, fmt.Errorf("taskbridge serve exited at start")
	case <-ctx.Done():
		stop()
		return "", nil, fmt.Errorf("taskbridge serve did not start: %w", ctx.Err())
	}
}
