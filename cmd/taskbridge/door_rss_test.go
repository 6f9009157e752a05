package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
)

// procKiB reads one "Vm…:  N kB" line of /proc/PID/status.
func procKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading the child's memory from /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", field, line)
			}
			return n
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}

// TestUnauthenticatedBodiesDoNotGrowRSS (issue 12, acceptance 2): 100 connections without
// credentials, each sending a 4 MiB body (half of them 2026-07-28 requests, the era that
// used to be served without a key), raise the resident memory of a real "taskbridge
// serve" by less than 20 MiB: the front door answers 401 from the headers, never buffers
// a body before authentication, and closes each connection.
func TestUnauthenticatedBodiesDoNotGrowRSS(t *testing.T) {
	fx := fixture.New(fixture.Options{Scale: 0.1})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	bin := buildTaskbridge(t, t.TempDir())
	const key = "rss-key-0123456789abcdef"
	c := serveChild(t, bin, up.URL+"/mcp", "sqlite:"+filepath.Join(t.TempDir(), "tb.db"), "rss",
		"--auth", `{"api_keys":[{"key":"`+key+`","principal":"p"}]}`)
	pid := c.cmd.Process.Pid

	// Warm up the paths the attack takes (one authenticated session, one refusal).
	lc := legacyclient.New(c.url)
	lc.Header = http.Header{"Authorization": {"Bearer " + key}}
	if _, err := lc.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := legacyclient.New(c.url).Initialize(context.Background()); err == nil {
		t.Fatal("initialize without a key succeeded")
	}
	time.Sleep(200 * time.Millisecond)
	base := procKiB(t, pid, "VmRSS")
	// Reset the peak (VmHWM) so that after the attack it is the attack's peak.
	hwmReset := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil

	const conns, bodySize, chunk = 100, 4 << 20, 64 << 10
	host := strings.TrimSuffix(strings.TrimPrefix(c.url, "http://"), "/mcp")
	var unauthorized atomic.Int64
	var sampled atomic.Int64
	stop := make(chan struct{})
	sampler := make(chan struct{})
	go func() {
		defer close(sampler)
		for {
			if kb := procKiB(t, pid, "VmRSS"); kb > sampled.Load() {
				sampled.Store(kb)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	ready := make(chan struct{})
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.Dial("tcp", host)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(60 * time.Second))
			era := ""
			if i%2 == 0 {
				era = "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: long_job\r\n"
			}
			fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
				"Accept: application/json, text/event-stream\r\n%sContent-Length: %d\r\n\r\n", host, era, bodySize)
			got := make(chan int, 1)
			go func() {
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					got <- 0
					return
				}
				resp.Body.Close()
				got <- resp.StatusCode
			}()
			<-ready
			buf := make([]byte, chunk)
			for sent := 0; sent < bodySize; sent += chunk {
				if _, err := conn.Write(buf); err != nil {
					break // the bridge closed the connection: what it should do
				}
			}
			if <-got == http.StatusUnauthorized {
				unauthorized.Add(1)
			}
		}()
	}
	close(ready)
	wg.Wait()
	close(stop)
	<-sampler
	peak := sampled.Load()
	if hwmReset {
		peak = max(peak, procKiB(t, pid, "VmHWM"))
	}
	grew := peak - base
	t.Logf("bridge RSS: %d KiB before, peak %d KiB during %d unauthenticated 4 MiB bodies (+%d KiB; peak from VmHWM: %v)",
		base, peak, conns, grew, hwmReset)
	if n := unauthorized.Load(); n != conns {
		t.Errorf("%d of %d connections got 401", n, conns)
	}
	if grew >= 20<<10 {
		t.Errorf("RSS grew by %d KiB, want < 20 MiB", grew)
	}
	// The bridge still serves its authenticated client.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := lc.Call(ctx, "ping", nil); err != nil {
		t.Errorf("ping after the attack: %v", err)
	}
}
