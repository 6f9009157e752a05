package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain re-executes the test binary as tbfixture when TBFIXTURE_MAIN=1.
func TestMain(m *testing.M) {
	if os.Getenv("TBFIXTURE_MAIN") == "1" {
		os.Args = append([]string{"tbfixture"}, strings.Fields(os.Getenv("TBFIXTURE_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestServeAndSIGTERM(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TBFIXTURE_MAIN=1", "TBFIXTURE_ARGS=-addr 127.0.0.1:0 -scale 0.1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/mcp") {
		t.Fatalf("first line = %q", line)
	}

	body := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "server/discover")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("discover: HTTP %d", resp.StatusCode)
	}

	resp, err = http.Get(strings.TrimSuffix(url, "/mcp") + "/fixture/stats")
	if err != nil {
		t.Fatal(err)
	}
	var st struct{ Methods map[string]int }
	json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if st.Methods["server/discover"] != 1 {
		t.Errorf("stats methods = %v", st.Methods)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("tbfixture did not exit on SIGTERM")
	}
}

// TestConformanceFlag: -conformance serves the conformance suite's surface (discover
// declares prompts, resources and completions; without the flag it does not).
func TestConformanceFlag(t *testing.T) {
	for _, tc := range []struct {
		args string
		want bool
	}{{"-addr 127.0.0.1:0 -conformance", true}, {"-addr 127.0.0.1:0", false}} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "TBFIXTURE_MAIN=1", "TBFIXTURE_ARGS="+tc.args)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			cmd.Process.Kill()
			t.Fatal(err)
		}
		url := strings.TrimPrefix(strings.TrimSpace(line), "listening ")
		body := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "server/discover")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cmd.Process.Kill()
			t.Fatal(err)
		}
		var d struct {
			Result struct {
				Capabilities map[string]json.RawMessage `json:"capabilities"`
			} `json:"result"`
		}
		json.NewDecoder(resp.Body).Decode(&d)
		resp.Body.Close()
		cmd.Process.Kill()
		cmd.Wait()
		for _, c := range []string{"prompts", "resources", "completions"} {
			if _, ok := d.Result.Capabilities[c]; ok != tc.want {
				t.Errorf("%s: capability %s declared %v, want %v", tc.args, c, ok, tc.want)
			}
		}
	}
}
