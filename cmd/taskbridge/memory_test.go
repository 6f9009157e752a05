package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/legacyclient"
)

// TestMemoryBounds (issue 12, acceptance 6) on a real "taskbridge serve" process with its
// SQLite store, measured from outside through the admin listener's heap profile (after a
// forced collection):
//   - 100 sessions opened with a 1 MiB clientInfo each grow the store file (after a WAL
//     checkpoint) and the Go heap by under 5 MiB each;
//   - 60 tasks with 6 MiB results, finished and never fetched, leave the heap under 64 MiB
//     above where it started, and tasks/result still answers the whole result.
func TestMemoryBounds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; moves 460 MiB")
	}
	const resultSize = 6 << 20
	bin := buildTaskbridge(t, t.TempDir())
	db := filepath.Join(t.TempDir(), "tb.db")
	s := startServe(t, bin, bigUpstream(t, resultSize), db, "--status-timeout", "1m")
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	defer hc.CloseIdleConnections()

	t.Run("100 initialize with a 1 MiB clientInfo", func(t *testing.T) {
		info := fmt.Sprintf(`{"name":"bulky","version":"9.9","icons":[{"src":"data:image/png;base64,%s"}]}`, strings.Repeat("A", 1<<20))
		params := json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":` + info + `}`)
		file0, heap0 := checkpointedSize(t, db), childHeap(t, s.admin)
		for range 100 {
			c := legacyclient.New(s.url)
			c.HTTP = hc
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if _, err := c.Call(ctx, "initialize", params); err != nil {
				t.Fatalf("initialize: %v", err)
			}
			if _, err := c.Call(ctx, "ping", nil); err != nil { // the session is now cached too
				t.Fatalf("ping: %v", err)
			}
			cancel()
		}
		file, heap := checkpointedSize(t, db)-file0, childHeap(t, s.admin).minus(heap0)
		t.Logf("store file grew %.2f MiB; heap grew %.2f MiB (HeapAlloc), %.2f MiB (HeapInuse)", mib(file), mib(heap.alloc), mib(heap.inuse))
		if file >= 5<<20 || heap.alloc >= 5<<20 || heap.inuse >= 5<<20 {
			t.Errorf("store grew %.2f MiB, heap %.2f / %.2f MiB; want each under 5 MiB", mib(file), mib(heap.alloc), mib(heap.inuse))
		}
	})

	t.Run("60 finished 6 MiB results", func(t *testing.T) {
		c := legacyclient.New(s.url)
		c.HTTP = hc
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // the whole subtest
		defer cancel()
		if _, err := c.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		heap0 := childHeap(t, s.admin)
		var ids []string
		for i := range 60 { // one at a time: 60 polls of 6 MiB at once would only measure the machine
			res, err := c.Call(ctx, "tools/call", map[string]any{"name": "big", "arguments": map[string]any{"i": i}, "task": map[string]any{}})
			if err != nil {
				t.Fatalf("tools/call %d: %v", i, err)
			}
			id := gjson.GetBytes(res, "task.taskId").Str
			ids = append(ids, id)
			waitCompleted(t, c, id)
		}
		heap := childHeap(t, s.admin).minus(heap0)
		t.Logf("60 finished tasks of 6 MiB: heap grew %.1f MiB (HeapAlloc), %.1f MiB (HeapInuse)", mib(heap.alloc), mib(heap.inuse))
		if heap.alloc >= 64<<20 || heap.inuse >= 64<<20 {
			t.Errorf("heap grew %.1f / %.1f MiB, want under 64 MiB", mib(heap.alloc), mib(heap.inuse))
		}
		res, err := c.Call(ctx, "tasks/result", map[string]string{"taskId": ids[0]})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(gjson.GetBytes(res, "content.0.text").Str); n != resultSize {
			t.Fatalf("tasks/result: text of %d bytes, want %d", n, resultSize)
		}
	})
}

// bigUpstream is a minimal 2026-07-28 upstream over real HTTP: tools/call "big" creates a
// task, completed at its first tasks/get with a CallToolResult of about size bytes. The
// answers are written as bytes, so this test process (built with -race) spends no time
// encoding them and keeps nothing per task.
func bigUpstream(t *testing.T, size int) string {
	text := strings.Repeat("x", size)
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id, method := gjson.GetBytes(body, "id").Raw, gjson.GetBytes(body, "method").Str
		if id == "" {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		now := time.Now().UTC().Format(time.RFC3339Nano)
		task := func(taskID, status string) string {
			return fmt.Sprintf(`"taskId":%q,"status":%q,"createdAt":%q,"lastUpdatedAt":%q,"ttlMs":3600000,"pollIntervalMs":100`, taskID, status, now, now)
		}
		var result string
		switch method {
		case "server/discover":
			result = `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{},` +
				`"extensions":{"io.modelcontextprotocol/tasks":{}}},"ttlMs":0,"cacheScope":"private"}`
		case "tools/call":
			result = `{"resultType":"task",` + task(fmt.Sprintf("up-%d", n.Add(1)), "working") + `}`
		case "tasks/get":
			result = `{"resultType":"complete",` + task(gjson.GetBytes(body, "params.taskId").Str, "completed") +
				`,"result":{"content":[{"type":"text","text":"` + text + `"}]}}`
		default:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"error":{"code":-32601,"message":"Method not found"}}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":`+result+`}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

func waitCompleted(t *testing.T, c *legacyclient.Client, id string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := c.Call(ctx, "tasks/get", map[string]string{"taskId": id})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if st := gjson.GetBytes(res, "status").Str; st == "completed" {
			return
		} else if st != "working" || time.Now().After(deadline) {
			t.Fatalf("task %s: status %q", id, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// heapFigures are the child's HeapAlloc and HeapInuse (or differences of them).
type heapFigures struct{ alloc, inuse int64 }

func (h heapFigures) minus(o heapFigures) heapFigures {
	return heapFigures{h.alloc - o.alloc, h.inuse - o.inuse}
}

var memStatLine = regexp.MustCompile(`(?m)^# (HeapAlloc|HeapInuse) = (\d+)$`)

// childHeap reads the serve process's heap after a collection: the admin listener's heap
// profile with gc=1 runs runtime.GC first, and debug=1 appends runtime.MemStats.
func childHeap(t *testing.T, admin string) heapFigures {
	t.Helper()
	resp, err := http.Get(admin + "/debug/pprof/heap?debug=1&gc=1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var h heapFigures
	for _, m := range memStatLine.FindAllStringSubmatch(string(b), -1) {
		n, _ := strconv.ParseInt(m[2], 10, 64)
		if m[1] == "HeapAlloc" {
			h.alloc = n
		} else {
			h.inuse = n
		}
	}
	if h.alloc == 0 || h.inuse == 0 {
		t.Fatalf("no MemStats in the heap profile (HTTP %d)", resp.StatusCode)
	}
	return h
}

// checkpointedSize folds the WAL into the database file and returns the file's size.
func checkpointedSize(t *testing.T, path string) int64 {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var busy, logFrames, done int
	if err := db.QueryRow(`PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logFrames, &done); err != nil || busy != 0 {
		t.Fatalf("wal_checkpoint: busy %d, %v", busy, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
