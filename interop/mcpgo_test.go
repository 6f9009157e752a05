// The real github.com/mark3labs/mcp-go v1.2.1 peers of interop/mcpgo (a test-only module, so
// the main module never depends on mcp-go), proven directly, without the bridge: mcpgo-client
// against mcpgo-server in both modes over HTTP and stdio, the TS SDK v1 client against
// mcpgo-server, and what mcpgo-server answers to server/discover. These are the upstream and
// client shapes issue 15 routes for; mcpgo_bridge_test.go puts the bridge between them.
package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/testenv"
)

// Texts of interop/mcpgo (cmd/mcpgo-server/tools.go, cmd/mcpgo-client/handlers.go).
const (
	mcpgoToolErrorText     = "failing_job: simulated tool failure"
	mcpgoProtocolErrorText = "Internal error: simulated protocol failure"
	mcpgoSamplingAnswer    = "pong from mcpgo-client"
	mcpgoRootURI           = "file:///tmp/mcpgo-client-root"
)

// mcp-go's task ids are UUIDv4.
var mcpgoTaskID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

var (
	mcpgoOnce sync.Once
	mcpgoDir  string
	mcpgoErr  error
)

// mcpgoBinaries builds interop/mcpgo's mcpgo-server and mcpgo-client once per test binary run
// (go build -C interop/mcpgo: its own module, pinned to mcp-go v1.2.1). A failed build skips
// on a developer machine and fails under CI=true.
func mcpgoBinaries(t *testing.T) (server, client string) {
	t.Helper()
	mcpgoOnce.Do(func() {
		mcpgoDir, mcpgoErr = os.MkdirTemp("", "taskbridge-mcpgo-bin-")
		if mcpgoErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-C", filepath.Join(testenv.RepoRoot(t), "interop", "mcpgo"),
			"-o", mcpgoDir+string(os.PathSeparator), "./cmd/...")
		if out, err := cmd.CombinedOutput(); err != nil {
			mcpgoErr = &buildError{err: err, out: string(out)}
		}
	})
	if mcpgoErr != nil {
		testenv.Missing(t, "building the mcp-go peers in interop/mcpgo: %v", mcpgoErr)
	}
	return filepath.Join(mcpgoDir, "mcpgo-server"), filepath.Join(mcpgoDir, "mcpgo-client")
}

// startMcpgoServer runs "mcpgo-server -addr 127.0.0.1:0 args…" and returns its /mcp URL. It is
// stopped with SIGTERM (then SIGKILL) when t ends; its stderr is logged if t failed.
func startMcpgoServer(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start mcpgo-server: %v", err)
	}
	exited := make(chan struct{})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		io.Copy(io.Discard, stdout)
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("mcpgo-server %v stderr:\n%s", args, tail(stderr.String(), 40))
		}
	})
	select {
	case l := <-lines:
		if url, ok := strings.CutPrefix(l, "listening "); ok {
			return url
		}
		t.Fatalf("mcpgo-server: unexpected first line %q", l)
	case <-exited:
		t.Fatalf("mcpgo-server exited at start: %s", stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("mcpgo-server printed no URL within 30 s")
	}
	return ""
}

// syncBuffer is a bytes.Buffer safe for a writing process and a reading test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// runMcpgo runs one mcpgo-client flow and returns its JSON line; a crash fails the test.
func runMcpgo(t *testing.T, bin string, args ...string) gjson.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, "-timeout", "60s")...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	line := strings.TrimSpace(stdout.String())
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	o := gjson.Parse(line)
	if err != nil || !gjson.Valid(line) || o.Get("crash").Exists() {
		t.Fatalf("mcpgo-client %v crashed (%v): %s\nstderr: %s", args, err, line, tail(stderr.String(), 30))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mcpgo-client %v (%s) printed:\n%s", args, time.Since(start).Round(time.Millisecond), line)
		}
	})
	return o
}

// mcpgoCounts is mcpgo-server's -count-file for one tool.
type mcpgoCounts struct{ Runs, Finished, Cancelled int }

// waitCounts reads the count file until want(tool's counts) holds or 5 s pass, and returns
// the last counts read: a cancelled handler records its end just after the cancel returns.
func waitCounts(t *testing.T, path, tool string, want func(mcpgoCounts) bool) mcpgoCounts {
	t.Helper()
	var c mcpgoCounts
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("count file: %v", err)
		}
		c = mcpgoCounts{}
		g := gjson.GetBytes(b, gjson.Escape(tool))
		c.Runs, c.Finished, c.Cancelled = int(g.Get("runs").Int()), int(g.Get("finished").Int()), int(g.Get("cancelled").Int())
		if want(c) || time.Now().After(deadline) {
			return c
		}
	}
}

// mcpgoFlow is one mcpgo-client flow and what it must show against a given peer.
type mcpgoFlow struct {
	name  string
	args  []string // extra client flags
	check func(t *testing.T, o gjson.Result, transport string, countFile string)
}

// wantStr asserts o's path is want.
func wantStr(t *testing.T, o gjson.Result, path, want string) {
	t.Helper()
	if got := o.Get(path).String(); got != want {
		t.Errorf("%s = %q, want %q", path, got, want)
	}
}

func wantInt(t *testing.T, o gjson.Result, path string, want int64) {
	t.Helper()
	if got := o.Get(path); got.Int() != want {
		t.Errorf("%s = %s, want %d", path, got.Raw, want)
	}
}

func wantTrue(t *testing.T, o gjson.Result, path string) {
	t.Helper()
	if !o.Get(path).Bool() {
		t.Errorf("%s = %s, want true", path, o.Get(path).Raw)
	}
}

// wantRuns asserts the tool's handler ran exactly once and ended as wanted.
func wantRuns(t *testing.T, countFile, tool string, want mcpgoCounts) {
	t.Helper()
	if got := waitCounts(t, countFile, tool, func(c mcpgoCounts) bool { return c == want }); got != want {
		t.Errorf("mcpgo-server %s counts %+v, want %+v", tool, got, want)
	}
}

// wireMethods returns the methods of mcpgo-client's "wire" entries on stream.
func wireMethods(o gjson.Result, stream string) []string {
	var out []string
	for _, w := range o.Get("wire").Array() {
		if w.Get("stream").Str == stream {
			out = append(out, w.Get("method").Str)
		}
	}
	return out
}

// checkAskClient asserts ask_client's result carries the client's three answers, in order,
// and where (over HTTP) each request arrived: sampling and roots on the standalone GET stream
// only; elicitation on elicitStream ("GET" for a task, "POST" for a synchronous call).
func checkAskClient(t *testing.T, o gjson.Result, transport, result, elicitStream string) {
	t.Helper()
	wantStr(t, o, result+".structuredContent.sampling.text", mcpgoSamplingAnswer)
	wantStr(t, o, result+".structuredContent.roots.0", mcpgoRootURI)
	wantStr(t, o, result+".structuredContent.elicitation.action", "accept")
	var methods []string
	for _, r := range o.Get("serverRequests").Array() {
		methods = append(methods, r.Get("method").Str)
	}
	if want := []string{"sampling/createMessage", "roots/list", "elicitation/create"}; !slices.Equal(methods, want) {
		t.Errorf("server→client requests %v, want %v", methods, want)
	}
	if transport != "http" {
		return
	}
	get, post := wireMethods(o, "GET"), wireMethods(o, "POST")
	for _, m := range []string{"sampling/createMessage", "roots/list"} {
		if !slices.Contains(get, m) || slices.Contains(post, m) {
			t.Errorf("%s: on GET %v, on POST %v; mcp-go sends it on the standalone GET stream only", m, get, post)
		}
	}
	on := get
	if elicitStream == "POST" {
		on = post
	}
	if !slices.Contains(on, "elicitation/create") || len(get)+len(post) != 3 {
		t.Errorf("elicitation/create: on GET %v, on POST %v; want it on %s, each request once", get, post, elicitStream)
	}
}

// mcpgoDirectFlows are the flows against mcpgo-server itself (-scale 0.2), with mcp-go's own
// answers: a task tool's isError result ends "completed", never "failed"; -32603 is the only
// error a failed task can carry.
var mcpgoDirectFlows = []mcpgoFlow{
	{name: "tools", check: func(t *testing.T, o gjson.Result, _, _ string) {
		for tool, want := range map[string]string{"greet": "", "slow_compute": "optional",
			"failing_job": "required", "protocol_error_job": "optional", "ask_client": "optional"} {
			wantStr(t, o, "taskSupport."+tool, want)
		}
		if !o.Get("serverTasks.requests.tools.call").Exists() {
			t.Errorf("initialize capabilities.tasks = %s, want requests.tools.call", o.Get("serverTasks").Raw)
		}
	}},
	{name: "sync", check: func(t *testing.T, o gjson.Result, _, counts string) {
		wantStr(t, o, "resultText", "Hello, World!")
		wantRuns(t, counts, "greet", mcpgoCounts{1, 1, 0})
	}},
	{name: "create_poll_result", check: func(t *testing.T, o gjson.Result, _, counts string) {
		wantStr(t, o, "createdStatus", "working")
		wantStr(t, o, "finalStatus", "completed")
		wantStr(t, o, "resultText", "Computation mcpgo completed after 1s. Result: 42.")
		wantTrue(t, o, "resultRelatedTaskMatches")
		if id := o.Get("taskId").Str; !mcpgoTaskID.MatchString(id) {
			t.Errorf("task id %q is not mcp-go's UUIDv4", id)
		}
		wantRuns(t, counts, "slow_compute", mcpgoCounts{1, 1, 0})
	}},
	{name: "list", check: func(t *testing.T, o gjson.Result, _, _ string) {
		wantTrue(t, o, "includesAll")
		// -page-size 2: three tasks come as two pages, only this session's.
		if got := o.Get("pageSizes").Raw; got != "[2,1]" {
			t.Errorf("tasks/list page sizes %s, want [2,1]", got)
		}
	}},
	{name: "cancel", check: func(t *testing.T, o gjson.Result, _, counts string) {
		wantStr(t, o, "cancelStatus", "cancelled")
		wantStr(t, o, "afterStatus", "cancelled")
		wantStr(t, o, "afterTask.statusMessage", "Task cancelled by request")
		wantInt(t, o, "secondCancelError.code", -32602)
		// mcp-go answers tasks/result of a cancelled task with an empty result (no content).
		if o.Get("resultAfterCancelError").Exists() || o.Get("resultAfterCancel.content").Exists() {
			t.Errorf("tasks/result after cancel: %s / %s", o.Get("resultAfterCancel").Raw, o.Get("resultAfterCancelError").Raw)
		}
		// The detached work really stopped: the handler saw the cancel and never finished.
		wantRuns(t, counts, "slow_compute", mcpgoCounts{1, 0, 1})
	}},
	{name: "tool_error", check: func(t *testing.T, o gjson.Result, _, counts string) {
		wantStr(t, o, "finalStatus", "completed")
		wantTrue(t, o, "resultIsError")
		wantStr(t, o, "resultText", mcpgoToolErrorText)
		wantTrue(t, o, "resultRelatedTaskMatches")
		wantRuns(t, counts, "failing_job", mcpgoCounts{1, 1, 0})
	}},
	{name: "protocol_error", check: func(t *testing.T, o gjson.Result, _, _ string) {
		wantStr(t, o, "finalStatus", "failed")
		wantStr(t, o, "statusMessage", mcpgoProtocolErrorText)
		wantInt(t, o, "resultError.code", -32603)
		wantStr(t, o, "resultError.message", mcpgoProtocolErrorText)
	}},
	{name: "unknown_id", check: func(t *testing.T, o gjson.Result, _, _ string) {
		for _, k := range []string{"getTaskError", "taskResultError", "cancelTaskError"} {
			wantInt(t, o, k+".code", -32602)
		}
	}},
	{name: "ask_client", check: func(t *testing.T, o gjson.Result, transport, counts string) {
		wantStr(t, o, "finalStatus", "completed")
		wantTrue(t, o, "resultRelatedTaskMatches")
		// A task's creating POST is answered before the tool runs, so even the elicitation
		// goes to the GET stream.
		checkAskClient(t, o, transport, "result", "GET")
		wantRuns(t, counts, "ask_client", mcpgoCounts{1, 1, 0})
	}},
	{name: "typed_task_call", check: func(t *testing.T, o gjson.Result, transport, counts string) {
		// mcp-go's typed CallTool with params.task: the server creates and runs the task, the
		// client fails to decode the CreateTaskResult and never learns the task id.
		wantStr(t, o, "error.message", "content is missing")
		if transport == "http" { // over stdio the server ends with the client, maybe before the task starts
			wantRuns(t, counts, "slow_compute", mcpgoCounts{1, 1, 0})
		}
	}},
	{name: "ask_client_sync", check: func(t *testing.T, o gjson.Result, transport, _ string) {
		checkAskClient(t, o, transport, "result", "POST")
	}},
}

// mcpgoServerTarget returns the mcpgo-client flags reaching an mcpgo-server started with
// args: -url of a running HTTP server, or -stdio with the command line to launch.
func mcpgoServerTarget(t *testing.T, srvBin, transport string, args ...string) []string {
	t.Helper()
	if transport == "http" {
		return []string{"-url", startMcpgoServer(t, srvBin, args...)}
	}
	argv, _ := json.Marshal(append([]string{srvBin, "-stdio"}, args...))
	return []string{"-stdio", string(argv)}
}

func TestMcpgoClientAgainstMcpgoServer(t *testing.T) {
	srvBin, cliBin := mcpgoBinaries(t)
	for _, mode := range []string{"dual", "legacy"} {
		for _, transport := range []string{"http", "stdio"} {
			t.Run(mode+"/"+transport, func(t *testing.T) {
				for _, f := range mcpgoDirectFlows {
					t.Run(f.name, func(t *testing.T) {
						t.Parallel()
						counts := filepath.Join(t.TempDir(), "counts.json")
						args := []string{"-mode", mode, "-scale", "0.2", "-count-file", counts}
						if f.name == "list" {
							args = append(args, "-page-size", "2")
						}
						o := runMcpgo(t, cliBin, append(mcpgoServerTarget(t, srvBin, transport, args...), "-flow", f.name)...)
						wantStr(t, o, "protocolVersion", "2025-11-25")
						wantStr(t, o, "transport", transport)
						f.check(t, o, transport, counts)
					})
				}
			})
		}
	}
}

// TestTSClientAgainstMcpgoServer: the TS SDK v1 client's task flows against mcpgo-server in
// both modes (it speaks 2025-11-25 through initialize, so both serve it the same).
func TestTSClientAgainstMcpgoServer(t *testing.T) {
	srvBin, _ := mcpgoBinaries(t)
	node, dir := testenv.Node22(t), testenv.InteropDir(t)
	for _, mode := range []string{"legacy", "dual"} {
		t.Run(mode, func(t *testing.T) {
			e := &env{node: node, dir: dir, url: startMcpgoServer(t, srvBin, "-mode", mode, "-scale", "0.2")}
			t.Run("stream", func(t *testing.T) {
				o := e.run(t, "stream", "--tool", "slow_compute", "--args", `{"seconds":1}`)
				o.checkOK(t)
				if got := o.text("result"); got != "Computation default completed after 1s. Result: 42." {
					t.Errorf("result %q", got)
				}
			})
			t.Run("poll", func(t *testing.T) {
				o := e.run(t, "poll", "--tool", "slow_compute", "--args", `{"seconds":1}`)
				o.checkOK(t)
				if o.relatedTask("result") != o.str("taskId") {
					t.Errorf("result related-task %q, task %q", o.relatedTask("result"), o.str("taskId"))
				}
			})
			t.Run("list", func(t *testing.T) {
				o := e.run(t, "list", "--tool", "slow_compute", "--args", `{"seconds":1}`)
				o.checkOK(t)
			})
			t.Run("cancel", func(t *testing.T) {
				o := e.run(t, "cancel", "--tool", "slow_compute", "--args", `{"seconds":30}`)
				o.checkOK(t)
			})
			t.Run("protocol-error", func(t *testing.T) {
				o := e.run(t, "protocol-error")
				o.checkOK(t)
				if o.code("resultError") != -32603 || o.str("resultError", "message") != mcpgoProtocolErrorText {
					t.Errorf("tasks/result error %v", o.get("resultError"))
				}
			})
			t.Run("unknown", func(t *testing.T) { e.run(t, "unknown").checkOK(t) })
			t.Run("tool-error", func(t *testing.T) {
				// mcp-go ends a task whose result has isError:true "completed" (it has no way to
				// store a result on a failed task); the TS client's own check wants "failed".
				o := e.run(t, "tool-error")
				if got := o.strs("failures"); !slices.Equal(got, []string{"final status completed, want failed"}) {
					t.Errorf("failures %v, want only the completed-vs-failed one", got)
				}
				if v, _ := o.get("result", "isError").(bool); !v || o.text("result") != mcpgoToolErrorText {
					t.Errorf("tasks/result %v", o.get("result"))
				}
			})
		})
	}
}

// discoverBody is a 2026-07-28 server/discover as a modern client sends it.
const discoverBody = `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{` +
	`"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientInfo":{"name":"interop-test","version":"1"},` +
	`"io.modelcontextprotocol/clientCapabilities":{}}}}`

// discoverHTTP posts discoverBody with the 2026-07-28 headers and returns status and body.
func discoverHTTP(t *testing.T, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(discoverBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "server/discover")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// discoverStdio writes discoverBody to "mcpgo-server -stdio args…" and returns its answer.
func discoverStdio(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-stdio"}, args...)...)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	fmt.Fprintln(stdin, discoverBody)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	if !sc.Scan() {
		t.Fatalf("mcpgo-server -stdio %v answered nothing", args)
	}
	return sc.Text()
}

// wantVersions asserts the versions at path include or lack 2026-07-28, and that all others
// are 2025 or older.
func wantVersions(t *testing.T, body, path string, modern bool) {
	t.Helper()
	var vs []string
	for _, v := range gjson.Get(body, path).Array() {
		vs = append(vs, v.Str)
	}
	if slices.Contains(vs, "2026-07-28") != modern || !slices.Contains(vs, "2025-11-25") {
		t.Errorf("%s = %v: want 2025-11-25, and 2026-07-28 %v", path, vs, map[bool]string{true: "included", false: "absent"}[modern])
	}
	for _, v := range vs {
		if v != "2026-07-28" && v > "2025-12" {
			t.Errorf("%s lists %s", path, v)
		}
	}
}

// TestMcpgoServerDiscover records what mcpgo-server answers to server/discover in each mode
// and on each transport: the upstream shapes issue 15's route choice has to read.
func TestMcpgoServerDiscover(t *testing.T) {
	srvBin, _ := mcpgoBinaries(t)
	t.Run("dual/http", func(t *testing.T) {
		status, body := discoverHTTP(t, startMcpgoServer(t, srvBin))
		t.Logf("HTTP %d %s", status, body)
		if status != http.StatusOK || !gjson.Get(body, "result").Exists() {
			t.Fatalf("want a 200 result")
		}
		checkDualDiscover(t, body)
	})
	t.Run("legacy/http", func(t *testing.T) {
		status, body := discoverHTTP(t, startMcpgoServer(t, srvBin, "-mode", "legacy"))
		t.Logf("HTTP %d %s", status, body)
		if status != http.StatusBadRequest || gjson.Get(body, "error.code").Int() != -32022 {
			t.Fatalf("want HTTP 400 with error -32022")
		}
		wantVersions(t, body, "error.data.supported", false)
	})
	t.Run("dual/stdio", func(t *testing.T) {
		body := discoverStdio(t, srvBin)
		t.Logf("%s", body)
		checkDualDiscover(t, body)
	})
	t.Run("legacy/stdio", func(t *testing.T) {
		// mcp-go's stdio transport has no version restriction: -mode legacy only narrows the
		// supportedVersions discover lists. It still answers with a result, not -32022.
		body := discoverStdio(t, srvBin, "-mode", "legacy")
		t.Logf("%s", body)
		if !gjson.Get(body, "result").Exists() {
			t.Fatalf("want a result")
		}
		wantVersions(t, body, "result.supportedVersions", false)
	})
}

// checkDualDiscover: supportedVersions from 2026-07-28 down, the legacy capabilities.tasks
// object, and no SEP-2663 tasks extension: tasks live only on the 2025-11-25 face.
func checkDualDiscover(t *testing.T, body string) {
	t.Helper()
	wantVersions(t, body, "result.supportedVersions", true)
	if !gjson.Get(body, "result.capabilities.tasks.requests.tools.call").Exists() {
		t.Errorf("capabilities.tasks.requests.tools.call missing: %s", gjson.Get(body, "result.capabilities").Raw)
	}
	if gjson.Get(body, `result.capabilities.extensions.io\.modelcontextprotocol/tasks`).Exists() {
		t.Errorf("discover advertises the SEP-2663 tasks extension")
	}
}

// TestMcpgoDefaultClientNegotiation records the era mcp-go's own client lands on against
// mcpgo-server when no version is pinned (it tries server/discover first), and what that
// does to its tasks. On 2026-07-28 mcp-go keeps tasks/get but has removed tasks/result.
func TestMcpgoDefaultClientNegotiation(t *testing.T) {
	srvBin, cliBin := mcpgoBinaries(t)
	for _, c := range []struct {
		mode, transport, version string
		result                   bool // tasks/result answers
	}{
		{"dual", "http", "2025-11-25", true},     // WithContinuousListening keeps the client on initialize
		{"legacy", "http", "2025-11-25", true},   // the same
		{"dual", "stdio", "2026-07-28", false},   // discover answered: modern, and no tasks/result
		{"legacy", "stdio", "2026-07-28", false}, // stdio -mode legacy still serves 2026-07-28
	} {
		t.Run(c.mode+"/"+c.transport, func(t *testing.T) {
			t.Parallel()
			target := mcpgoServerTarget(t, srvBin, c.transport, "-mode", c.mode, "-scale", "0.2")
			o := runMcpgo(t, cliBin, append(target, "-flow", "create_poll_result", "-version", "")...)
			wantStr(t, o, "protocolVersion", c.version)
			wantStr(t, o, "finalStatus", "completed")
			if c.result {
				wantStr(t, o, "resultText", "Computation mcpgo completed after 1s. Result: 42.")
			} else {
				wantInt(t, o, "resultError.code", -32601)
			}
		})
	}
}
