package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/legacyclient"
)

func run(ctx context.Context, o options) error {
	dir, err := os.MkdirTemp("", "tbbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if o.bin == "" {
		o.bin = filepath.Join(dir, "taskbridge")
		fmt.Println("building taskbridge and tbfixture …")
		if out, err := goBuild(o.bin, "./cmd/taskbridge"); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	if o.fixtureBin == "" {
		o.fixtureBin = filepath.Join(dir, "tbfixture")
		if out, err := goBuild(o.fixtureBin, "./cmd/tbfixture"); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	fmt.Printf("machine: %d CPUs, %s\n\n", numCPU(), time.Now().Format(time.RFC3339))
	steps := map[string]func(context.Context, options, string) error{
		"passthrough": passthrough, "creation": creation, "polling": polling, "scale": scale}
	for _, name := range strings.Split(o.phases, ",") {
		step, ok := steps[strings.TrimSpace(name)]
		if !ok {
			return fmt.Errorf("unknown phase %q", name)
		}
		if err := step(ctx, o, dir); err != nil {
			return err
		}
		fmt.Println()
	}
	return nil
}

// ---- processes -------------------------------------------------------------------------

// fixtureProc is the Go fixture upstream running as its own process (so that "direct"
// and "through the bridge" both cross process boundaries, as in production).
type fixtureProc struct {
	url string
	cmd *exec.Cmd
}

// startFixture runs tbfixture on a loopback port with extra flags (e.g. -poll-ms 500).
func startFixture(ctx context.Context, bin string, extra ...string) (*fixtureProc, error) {
	p, err := startChild(ctx, bin, append([]string{"-addr", "127.0.0.1:0"}, extra...))
	if err != nil {
		return nil, err
	}
	return &fixtureProc{url: p.url, cmd: p.cmd}, nil
}

// taskGets sums the fixture's tasks/get counters (GET /fixture/stats).
func (f *fixtureProc) taskGets() int {
	resp, err := http.Get(strings.TrimSuffix(f.url, "/mcp") + "/fixture/stats")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n := 0
	gjson.GetBytes(b, "taskGets").ForEach(func(_, v gjson.Result) bool { n += int(v.Int()); return true })
	return n
}

func (f *fixtureProc) stop() { (&bridgeProc{cmd: f.cmd}).stop() }

// bridgeProc is a running "taskbridge serve" child.
type bridgeProc struct {
	url   string
	admin string // the admin listener's base URL, when one was asked for
	cmd   *exec.Cmd
}

// startBridge runs "taskbridge serve" and takes its URL from the start-up event, the JSON
// log line with message "taskbridge listening" on stderr (serve prints nothing on stdout);
// the rest of its log passes to our stderr.
func startBridge(ctx context.Context, bin, upstream, storeSpec string, extra ...string) (*bridgeProc, error) {
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--upstream", upstream, "--store", storeSpec,
		"--log-level", "error", "--log-format", "json"}, extra...)
	cmd := exec.CommandContext(ctx, bin, args...)
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := bufio.NewReader(errPipe)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, fmt.Errorf("bridge did not start: %v", err)
		}
		if gjson.Get(line, "message").Str == "taskbridge listening" {
			go io.Copy(os.Stderr, r)
			return &bridgeProc{url: gjson.Get(line, "mcp").Str, admin: gjson.Get(line, "admin").Str, cmd: cmd}, nil
		}
		os.Stderr.WriteString(line)
	}
}

// startChild runs a command whose first stdout line names its http://…/mcp URL.
func startChild(ctx context.Context, bin string, args []string) (*bridgeProc, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		return nil, fmt.Errorf("bridge did not start: %v", err)
	}
	go io.Copy(io.Discard, out)
	i, j := strings.Index(line, "http://"), strings.Index(line, "/mcp")
	if i < 0 || j < 0 {
		cmd.Process.Kill()
		return nil, fmt.Errorf("unexpected first line %q", line)
	}
	return &bridgeProc{url: line[i : j+4], cmd: cmd}, nil
}

func (p *bridgeProc) stop() {
	p.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// rssMB reads a process's resident set size.
func rssMB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(l, "VmRSS:")), "%f", &kb)
			return kb / 1024
		}
	}
	return -1
}

func numCPU() int { return runtimeNumCPU() }

// ---- load ------------------------------------------------------------------------------

// stats summarizes one load run.
type stats struct {
	n        int
	errs     int64
	p50, p99 time.Duration
	rps      float64
}

// load runs conc workers back to back for d; newWorker returns each worker's request func.
func load(ctx context.Context, conc int, d time.Duration, newWorker func(i int) (func() error, error)) (stats, error) {
	fns := make([]func() error, conc)
	for i := range fns {
		f, err := newWorker(i)
		if err != nil {
			return stats{}, err
		}
		fns[i] = f
	}
	var (
		mu   sync.Mutex
		all  []time.Duration
		errs atomic.Int64
		wg   sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for _, f := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 4096)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t0 := time.Now()
				if err := f(); err != nil {
					errs.Add(1)
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	el := time.Since(start)
	slices.Sort(all)
	s := stats{n: len(all), errs: errs.Load(), rps: float64(len(all)) / el.Seconds()}
	if len(all) > 0 {
		s.p50 = all[len(all)/2]
		s.p99 = all[min(len(all)-1, len(all)*99/100)]
	}
	return s, nil
}

// poster POSTs bodies to one URL with fixed headers; safe for one goroutine.
type poster struct {
	c      *http.Client
	url    string
	header http.Header
}

func newHTTPClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: conns * 2, MaxIdleConnsPerHost: conns * 2, MaxConnsPerHost: 0, IdleConnTimeout: time.Minute}}
}

func (p *poster) post(body []byte) error {
	req, err := http.NewRequest(http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = p.header.Clone()
	resp, err := p.c.Do(req)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 || bytes.Contains(b, []byte(`"error"`)) {
		return fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, b)
	}
	return nil
}

// directPoster calls the modern upstream straight: the 2026-07-28 envelope and headers.
func directPoster(c *http.Client, url string) func() error {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("MCP-Protocol-Version", "2026-07-28")
	h.Set("Mcp-Method", "tools/call")
	h.Set("Mcp-Name", "echo")
	p := &poster{c: c, url: url, header: h}
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	return func() error { return p.post(body) }
}

// legacySession opens a 2025-11-25 session on the bridge.
func legacySession(ctx context.Context, url string) (string, error) {
	lc := legacyclient.New(url)
	if _, err := lc.Initialize(ctx); err != nil {
		return "", err
	}
	return lc.SessionID(), nil
}

// bridgePoster calls through the bridge as a 2025-11-25 client of session sid.
func bridgePoster(c *http.Client, url, sid string, body []byte) func() error {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("MCP-Protocol-Version", "2025-11-25")
	h.Set("Mcp-Session-Id", sid)
	p := &poster{c: c, url: url, header: h}
	return func() error { return p.post(body) }
}

var echoLegacy = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)

func us(d time.Duration) string { return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond)) }

func median[T any](xs []T, less func(a, b T) int) T {
	c := slices.Clone(xs)
	slices.SortFunc(c, less)
	return c[len(c)/2]
}

// goBuild builds a package of this module (found by walking up to go.mod) into out.
func goBuild(out, pkg string) ([]byte, error) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, fmt.Errorf("go.mod not found above the working directory")
		}
		dir = parent
	}
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = dir
	return cmd.CombinedOutput()
}
