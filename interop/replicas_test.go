// Acceptance 2 of issue 6: two taskbridge replicas (real "taskbridge serve" processes) on one
// PostgreSQL, behind a load balancer without sticky sessions that alternates every HTTP
// request of the real TS SDK v1 client (legacy-client.mjs) between them. Create, poll,
// elicitation answer, list, cancel and result must all work, and the upstream (the Go
// fixture, in this process so its counters can be read) must run each call once.
package interop

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/testenv"
)

// replicaPG returns a DSN for a fresh schema in TASKBRIDGE_TEST_PG, dropped when t ends.
func replicaPG(t *testing.T) string { return testenv.PostgresSchema(t, "tbinterop") }

// serveReplica runs "taskbridge serve" on the store DSN and returns its /mcp URL. The
// process gets SIGKILL at test end; its stderr is logged when the test failed.
func serveReplica(t *testing.T, bin, upstream, dsn, name string) string {
	t.Helper()
	u, _ := serveReplicaCmd(t, bin, upstream, dsn, name)
	return u
}

// serveReplicaCmd is serveReplica that also returns the process (to SIGKILL it mid-test).
func serveReplicaCmd(t *testing.T, bin, upstream, dsn, name string) (string, *exec.Cmd) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--upstream", upstream,
		"--store", dsn, "--poll-floor-ms", "100", "--heartbeat", "1s", "--log-level", "debug", "--log-format", "json")
	stderr, banner := testenv.WatchServeLog(logf)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s stderr:\n%s", name, b)
		}
	})
	select {
	case b := <-banner:
		return b.MCP, cmd
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no listening event in its log after 30 s", name)
	}
	return "", cmd
}

// alternator is a reverse proxy that sends each HTTP request to the next replica in turn
// (a load balancer without sticky sessions) and counts the requests each replica got.
type alternator struct {
	next    atomic.Int64
	proxies []*httputil.ReverseProxy
	served  []atomic.Int64
}

func newAlternator(t *testing.T, urls ...string) (*alternator, string) {
	a := &alternator{served: make([]atomic.Int64, len(urls))}
	for _, u := range urls {
		target, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		// FlushInterval -1: SSE responses (POST streams, the GET stream) pass at once.
		a.proxies = append(a.proxies, &httputil.ReverseProxy{FlushInterval: -1, Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.URL.Path = target.Path
		}})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(a.next.Add(1)-1) % len(a.proxies)
		a.served[i].Add(1)
		a.proxies[i].ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return a, srv.URL + "/mcp"
}

func TestLegacyClientAcrossReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("builds taskbridge and runs two replicas")
	}
	node, dir := testenv.Node22(t), testenv.InteropDir(t)
	dsn := replicaPG(t)
	bin, _ := binaries(t)
	fx := fixture.New(fixture.Options{Name: "replicas-upstream", Scale: 0.2})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })

	r0 := serveReplica(t, bin, up.URL+"/mcp", dsn, "replica-0")
	r1 := serveReplica(t, bin, up.URL+"/mcp", dsn, "replica-1")
	lb, lbURL := newAlternator(t, r0, r1)
	e := &env{node: node, dir: dir, url: lbURL, fx: fx}

	// Each flow is one TS client (one session); every one of its HTTP requests — initialize,
	// the GET stream, each POST — goes to the other replica than the one before.
	t.Run("group", func(t *testing.T) {
		t.Run("poll", func(t *testing.T) {
			t.Parallel()
			o := e.run(t, "poll", "--tool", "long_job", "--args", `{"seconds":5}`)
			o.checkOK(t)
			id := o.str("taskId")
			if !bridgeTaskID.MatchString(id) {
				t.Errorf("taskId %q is not a bridge task id", id)
			}
			if st := o.strs("statuses"); len(st) < 2 || st[0] != "working" || st[len(st)-1] != "completed" {
				t.Errorf("statuses %v, want working … completed", st)
			}
			if got, want := o.text("result"), "Long job finished after 5s."; got != want {
				t.Errorf("tasks/result text %q, want %q", got, want)
			}
			if rel := o.relatedTask("result"); rel != id {
				t.Errorf("tasks/result related-task %q, want %q", rel, id)
			}
		})
		t.Run("elicit", func(t *testing.T) {
			t.Parallel()
			// callToolStream: the elicitation arrives on a tasks/result stream held by one
			// replica, the answer (a POST) goes to the other.
			o := e.run(t, "elicit", "--tool", "confirm_delete", "--args", `{"filename":"replicas.txt"}`)
			o.checkOK(t)
			id := o.str("taskId")
			if els, _ := o.get("elicitations").([]any); len(els) != 1 {
				t.Errorf("client saw %d elicitation/create requests, want 1", len(els))
			}
			if rel := o.relatedTask("elicitations", "0", "params"); rel != id || id == "" {
				t.Errorf("elicitation related-task %q, want %q", rel, id)
			}
			if got, want := o.str("resultText"), "Deleted replicas.txt"; got != want {
				t.Errorf("result text %q (error %v), want %q", got, o.get("error"), want)
			}
			if s := o.str("finalStatus"); s != "completed" {
				t.Errorf("final status %q, want completed", s)
			}
		})
		t.Run("poll-elicit", func(t *testing.T) {
			t.Parallel()
			// Polling with tasks/get; on input_required the client opens tasks/result, which
			// carries the elicitation; the answer and later polls alternate replicas.
			o := e.run(t, "poll", "--tool", "confirm_delete", "--args", `{"filename":"polled.txt"}`)
			o.checkOK(t)
			if st := o.strs("statuses"); !slices.Contains(st, "input_required") || st[len(st)-1] != "completed" {
				t.Errorf("statuses %v, want … input_required … completed", st)
			}
			if els, _ := o.get("elicitations").([]any); len(els) != 1 {
				t.Errorf("client saw %d elicitation/create requests, want 1", len(els))
			}
			if got, want := o.text("result"), "Deleted polled.txt"; got != want {
				t.Errorf("tasks/result text %q (error %v), want %q", got, o.get("resultError"), want)
			}
		})
		t.Run("list", func(t *testing.T) {
			t.Parallel()
			o := e.run(t, "list")
			o.checkOK(t)
			created, listed := o.strs("createdIds"), o.strs("listedIds")
			if len(created) != 2 || len(listed) != 2 {
				t.Errorf("created %v, listed %v: want the session's 2 tasks listed", created, listed)
			}
			for _, id := range created {
				if !slices.Contains(listed, id) {
					t.Errorf("tasks/list %v lacks %s", listed, id)
				}
			}
		})
		t.Run("cancel", func(t *testing.T) {
			t.Parallel()
			o := e.run(t, "cancel", "--tool", "slow_compute", "--args", `{"seconds":100}`)
			o.checkOK(t)
			if s := o.str("cancelStatus"); s != "cancelled" {
				t.Errorf("tasks/cancel status %q (error %v), want cancelled", s, o.get("cancelError"))
			}
			if s := o.str("afterStatus"); s != "cancelled" {
				t.Errorf("tasks/get after cancel (other replica): %q, want cancelled", s)
			}
			if c := o.code("secondCancelError"); c != -32602 {
				t.Errorf("second tasks/cancel: error %v; want -32602", o.get("secondCancelError"))
			}
			// The tasks/result that was blocked on one replica when the other cancelled
			// must end, not hang (the client's timeout would show as a failure above).
			if o.get("blockedResult") == nil && o.get("blockedResultError") == nil {
				t.Errorf("the blocked tasks/result never ended after the cancel")
			}
		})
	})

	st := fx.Stats()
	// One upstream execution per task the flows created: poll 1, elicit 1, poll-elicit 1,
	// list 2, cancel 1.
	want := map[string]int{"long_job": 1, "confirm_delete": 2, "slow_compute": 3}
	for tool, n := range want {
		if st.Executions[tool] != n {
			t.Errorf("upstream executions of %s = %d, want %d (all: %v)", tool, st.Executions[tool], n, st.Executions)
		}
	}
	if len(st.Updates) != 2 {
		t.Errorf("upstream got answers for %d input keys, want 2 (one per confirm_delete): %v", len(st.Updates), st.Updates)
	}
	for k, n := range st.Updates {
		if n != 1 {
			t.Errorf("upstream received %d tasks/update answers for %s, want 1", n, k)
		}
	}
	if st.Cancels < 1 {
		t.Errorf("upstream tasks/cancel count %d, want ≥ 1", st.Cancels)
	}
	n0, n1 := lb.served[0].Load(), lb.served[1].Load()
	t.Logf("requests: replica-0 %d, replica-1 %d", n0, n1)
	if n0 == 0 || n1 == 0 || n0-n1 > 1 || n1-n0 > 1 {
		t.Errorf("requests per replica %d / %d, want strict alternation", n0, n1)
	}
}
