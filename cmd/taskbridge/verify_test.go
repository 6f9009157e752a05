package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/testenv"
)

// verifyPlan names the fixture's tools: slow_compute runs long enough (2 s at scale 1)
// for cancels and restarts to land while it works; multi_input asks two questions as a
// task (input_required), which verify declines.
const verifyPlan = `tools:
  slow: {name: slow_compute, arguments: {seconds: 2, label: "verify ${canary}"}}
  quick: {name: greet, arguments: {name: verify}}
  input: {name: multi_input}
load: {concurrent: 4, pollers: 3}
step_timeout: 30s
`

// apiKeysConfig is a configuration with authentication and a concurrency cap.
const apiKeysConfig = `max_concurrent_tasks: 4
auth:
  api_keys:
    - {key: "verify-test-key-0123456789", principal: alice}
`

// runVerifyCmd runs "taskbridge verify" in-process and returns the exit status, stdout
// and stderr.
func runVerifyCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	start := time.Now()
	err := run(ctx, append([]string{"verify"}, args...), &out, &errb)
	t.Logf("verify took %s", time.Since(start).Round(100*time.Millisecond))
	if err != nil {
		errb.WriteString("taskbridge: " + err.Error() + "\n")
	}
	return exitCode(err), out.String(), errb.String()
}

// TestVerifyFixturePasses (issue 19, acceptance 1): against the Go fixture with a plan
// for its tools, every gate passes and verify exits 0; the table, the pinned facts and
// the progress lines are there.
func TestVerifyFixturePasses(t *testing.T) {
	fx := fixture.New(fixture.Options{PollIntervalMs: 100})
	srv := httptest.NewServer(fx)
	t.Cleanup(func() { srv.Close(); fx.Close() })
	dir := t.TempDir()
	plan := writeFile(t, dir, "plan.yaml", verifyPlan)
	cfg := writeFile(t, dir, "tb.yaml", apiKeysConfig)
	code, out, errOut := runVerifyCmd(t, "--upstream", srv.URL+"/mcp", "--config", cfg, "--plan", plan)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"upstream era:          2026-07-28", "verdict: pass"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	for _, c := range [][2]string{{"security", "second principal (2025-11-25)"}, {"security", "forged related-task _meta"}, {"security", "input answers never logged"},
		{"recovery", "initial call never repeated"},
		{"load", "backpressure past max_concurrent_tasks"}} {
		if f := strings.Fields(lineWith(out, c[1])); len(f) < 2 || f[0] != c[0] || !slices.Contains(f, "pass") {
			t.Errorf("%s / %s did not pass: %q", c[0], c[1], lineWith(out, c[1]))
		}
	}
	// the recovery gate's transport cuts and input checks run (issue 19), none skipped
	for _, c := range []string{"cut before CreateTaskResult (2025-11-25)", "cut after CreateTaskResult (2025-11-25)",
		"cut between completion and tasks/result", "cut after CreateTaskResult (2026-07-28)", "cut after cancel (2025-11-25)",
		"cut during input_required (2025-11-25)", "input during restart (2025-11-25)"} {
		if line := lineWith(out, c); !strings.Contains(line, " pass ") {
			t.Errorf("recovery / %s did not pass: %q", c, line)
		}
	}
	if line := lineWith(out, "input during restart"); !strings.Contains(line, "the upstream got 2 tasks/update") {
		t.Errorf("two questions, each answered twice: %q", line)
	}
	// the plan's label carries a canary: the arguments check runs and passes
	if line := lineWith(out, "arguments never logged"); !strings.Contains(line, " pass ") {
		t.Errorf("arguments never logged did not pass: %q", line)
	}
	// the expired-ttl check runs (a 1 s ttl on the 2025-11-25 face), it is not skipped
	if line := lineWith(out, "expired ttl"); !strings.Contains(line, " pass ") || !strings.Contains(line, "-32602") {
		t.Errorf("expired ttl check did not pass: %q", line)
	}
	// the purge check runs the bridge's purge on the run's store (ttl, then ttl + retention)
	if line := lineWith(out, "records purged after ttl"); !strings.Contains(line, " pass ") || !strings.Contains(line, "deleted after ttl + retention") {
		t.Errorf("purge check did not pass: %q", line)
	}
	if !strings.Contains(errOut, "verify: contract      initialize 2025-11-25") {
		t.Errorf("no progress on stderr:\n%s", errOut)
	}
	if strings.Contains(out, "verify-test-key-0123456789") || strings.Contains(errOut, "tbverify-key") {
		t.Error("a credential was printed")
	}
}

// TestVerifyUpstreamCmd (acceptance 1 and 3): the same with the fixture as a stdio child
// (--upstream-cmd), the upstream calls counted on the stdio transport; --json validates
// against docs/verify.schema.json.
func TestVerifyUpstreamCmd(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "go not on PATH: %v", err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "tbfixture")
	if out, err := exec.Command(goBin, "build", "-o", bin, "../tbfixture").CombinedOutput(); err != nil {
		t.Fatalf("go build tbfixture: %v\n%s", err, out)
	}
	plan := writeFile(t, dir, "plan.yaml", verifyPlan+"accept_session_scoped_listing: true\n")
	// audit_retention 0: the record goes at its ttl (the purge check once panicked on it)
	cfg := writeFile(t, dir, "cfg.yaml", "audit_retention: 0s\n")
	code, out, errOut := runVerifyCmd(t, "--upstream-cmd", bin+" -stdio -poll-ms 100", "--plan", plan, "--config", cfg, "--json")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	// acceptance 3: the JSON of a real run validates against the documented schema
	sch, err := jsonschema.NewCompiler().Compile(filepath.Join("..", "..", "docs", "verify.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if err := sch.Validate(doc); err != nil {
		t.Fatalf("the report does not validate: %v\n%s", err, out)
	}
	if v := gjson.Get(out, "verdict").Str; v != "pass" {
		t.Errorf("verdict %s:\n%s", v, out)
	}
	if ev := gjson.Get(out, `checks.#(check=="records purged after ttl + retention").evidence`).Str; !strings.Contains(ev, "retention 0s") {
		t.Errorf("purge check with audit_retention 0: %q", ev)
	}
	if up := gjson.Get(out, `facts.#(name=="upstream").value`).Str; up != "child "+bin+" -stdio -poll-ms 100" {
		t.Errorf("upstream fact %q", up)
	}
	ev := gjson.Get(out, `checks.#(check=="initial call never repeated").evidence`).Str
	if !strings.Contains(ev, "the upstream got") || strings.Contains(ev, "the upstream got 0 ") {
		t.Errorf("the stdio upstream's tools/call were not counted: %q", ev)
	}
}

// TestVerifyNoAuthFails (acceptance 2): a configuration without authentication fails the
// security gate with "task listing without an authenticated context" unless the plan
// accepts session-scoped listing.
func TestVerifyNoAuthFails(t *testing.T) {
	fx := fixture.New(fixture.Options{PollIntervalMs: 100, Scale: 0.25})
	srv := httptest.NewServer(fx)
	t.Cleanup(func() { srv.Close(); fx.Close() })
	plan := writeFile(t, t.TempDir(), "plan.yaml", verifyPlan)
	code, out, errOut := runVerifyCmd(t, "--upstream", srv.URL+"/mcp", "--plan", plan)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "task listing without an authenticated context") ||
		!strings.Contains(errOut, "failed: security/authenticated task listing") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", out, errOut)
	}
}

// TestVerifyUsageErrors: a missing upstream and a bad plan exit 2.
func TestVerifyUsageErrors(t *testing.T) {
	if code, _, errOut := runVerifyCmd(t); code != 2 || !strings.Contains(errOut, "upstream: required") {
		t.Errorf("no upstream: exit %d %s", code, errOut)
	}
	bad := writeFile(t, t.TempDir(), "plan.yaml", "tools: {slow: {nme: x}}\n")
	if code, _, errOut := runVerifyCmd(t, "--upstream", "http://127.0.0.1:1/mcp", "--plan", bad); code != 2 || !strings.Contains(errOut, "nme") {
		t.Errorf("bad plan: exit %d %s", code, errOut)
	}
}

// faultyUpstream is the fixture behind a fault (faultKind).
type faultyUpstream struct {
	kind     string
	fx       atomic.Pointer[fixture.Server]
	all      []*fixture.Server
	mu       sync.Mutex
	discover int
	ended    map[string]string // taskId → first terminal status seen
	lastBody map[string][]byte // taskId → its last tasks/get answer
}

func newFaulty(t *testing.T, kind string) string {
	u := &faultyUpstream{kind: kind, ended: map[string]string{}, lastBody: map[string][]byte{}}
	u.swap()
	srv := httptest.NewServer(u)
	t.Cleanup(func() {
		srv.Close()
		for _, f := range u.all {
			f.Close()
		}
	})
	return srv.URL + "/mcp"
}

func (u *faultyUpstream) swap() {
	f := fixture.New(fixture.Options{PollIntervalMs: 100})
	u.all = append(u.all, f)
	u.fx.Store(f)
}

func (u *faultyUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method := r.Header.Get("Mcp-Method")
	id := r.Header.Get("Mcp-Name")
	u.mu.Lock()
	if method == "server/discover" {
		u.discover++
		if u.kind == "loses-tasks" && u.discover > 1 {
			u.swap() // "restarted": every task it had is gone
		}
	}
	u.mu.Unlock()
	if u.kind == "ignores-cancel" && method == "tasks/cancel" {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":` + requestID(r) + `,"result":{"resultType":"complete"}}`))
		return
	}
	rec := httptest.NewRecorder()
	u.fx.Load().ServeHTTP(rec, r)
	body := rec.Body.Bytes()
	if method == "tasks/get" {
		body = u.alter(id, body)
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(rec.Code)
	w.Write(body)
}

// requestID reads the JSON-RPC id of a POST (the body is re-readable: the recorder path
// is not taken for the faked cancel).
func requestID(r *http.Request) string {
	var b bytes.Buffer
	b.ReadFrom(r.Body)
	return gjson.GetBytes(b.Bytes(), "id").Raw
}

// alter applies the tasks/get faults to one answer.
func (u *faultyUpstream) alter(id string, body []byte) []byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	status := gjson.GetBytes(body, "result.status").Str
	switch u.kind {
	case "changes-terminal":
		if first, ok := u.ended[id]; ok && first != "" {
			return bytes.Replace(body, []byte(`"status":"`+status+`"`), []byte(`"status":"failed"`), 1)
		}
		if status == "completed" {
			u.ended[id] = status
		}
	case "other-task":
		for other, b := range u.lastBody {
			if other != id {
				u.lastBody[id] = body
				return bytes.Replace(b, []byte(`"id":`+gjson.GetBytes(b, "id").Raw), []byte(`"id":`+gjson.GetBytes(body, "id").Raw), 1)
			}
		}
		u.lastBody[id] = body
	}
	return body
}

// TestVerifyFaultyUpstreams (acceptance 2): verify exits 1 naming the gate and the check
// against an upstream that loses its tasks after a restart, one that changes a terminal
// status, one that answers tasks/get for an id with another task's data, and one that
// ignores cancels.
func TestVerifyFaultyUpstreams(t *testing.T) {
	dir := t.TempDir()
	plan := writeFile(t, dir, "plan.yaml", verifyPlan)
	cfg := writeFile(t, dir, "tb.yaml", apiKeysConfig)
	for _, tc := range []struct {
		kind, want string
		front      func(http.Handler) http.Handler // a faulty proxy in front of the bridge
		only       []string                        // with front: the only checks that fail
	}{
		{kind: "loses-tasks", want: "recovery/restart while working (2026-07-28)"},
		{kind: "changes-terminal", want: "contract/task lifecycle 2026-07-28"},
		{kind: "other-task", want: "contract/task lifecycle 2026-07-28"},
		{kind: "ignores-cancel", want: "cancellation/cancel: operation outcome (2026-07-28)"},
		// Only the transport-cut and input checks see these two proxy faults: every other
		// check sends each request once and reads each question once, so renumbered ids
		// and dropped re-deliveries change nothing for them.
		{kind: "renumbers-ids+forgets-questions", want: "recovery/cut before CreateTaskResult (2025-11-25)",
			front: func(h http.Handler) http.Handler { return renumberIDs(forgetQuestions(h)) },
			only: []string{"recovery/cut before CreateTaskResult (2025-11-25)", "recovery/initial call never repeated",
				"recovery/cut during input_required (2025-11-25)", "recovery/input during restart (2025-11-25)"}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			url := newFaulty(t, tc.kind)
			verifyFront = tc.front
			defer func() { verifyFront = nil }()
			code, out, errOut := runVerifyCmd(t, "--upstream", url, "--config", cfg, "--plan", plan)
			if code != 1 {
				t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errOut)
			}
			for _, l := range strings.Split(errOut, "\n") {
				if strings.Contains(l, "verify: failed: ") {
					t.Log(l)
				}
			}
			if !strings.Contains(errOut, "verify: failed: ") || !strings.Contains(errOut, tc.want) {
				t.Errorf("the failure does not name %s:\n%s", tc.want, errOut)
			}
			if !strings.Contains(out, "verdict: fail") {
				t.Errorf("stdout:\n%s", out)
			}
			if tc.only != nil {
				failed := strings.Split(strings.TrimPrefix(lineWith(errOut, "verify: failed: "), "taskbridge: verify: failed: "), ", ")
				slices.Sort(failed)
				want := slices.Sorted(slices.Values(tc.only))
				if !slices.Equal(failed, want) {
					t.Errorf("failed %v, want exactly %v", failed, want)
				}
			}
		})
	}
}

// renumberIDs is a faulty proxy in front of the bridge: it gives every 2025-11-25
// tools/call a new JSON-RPC id (as a gateway that re-numbers requests would, without
// mapping the answers back: verify's client reads answers by order), so a client that
// retries a cut call with the same id reaches the bridge with a new call.
func renumberIDs(next http.Handler) http.Handler {
	var n atomic.Int64
	n.Store(1 << 40)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Method") == "" {
			var b bytes.Buffer
			b.ReadFrom(r.Body)
			body := b.Bytes()
			if id := gjson.GetBytes(body, "id"); id.Exists() && gjson.GetBytes(body, "method").Str == "tools/call" {
				body = bytes.Replace(body, []byte(`"id":`+id.Raw), fmt.Appendf(nil, `"id":%d`, n.Add(1)), 1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		next.ServeHTTP(w, r)
	})
}

// lineWith is the first line of s containing sub ("" if none).
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// forgetQuestions is a faulty proxy in front of the bridge: it passes each server→client
// request of an SSE answer once and drops it from every later stream, as a proxy that
// loses a question when the stream that carried it is cut.
func forgetQuestions(next http.Handler) http.Handler {
	var seen sync.Map
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&questionFilter{ResponseWriter: w, seen: &seen}, r)
	})
}

type questionFilter struct {
	http.ResponseWriter
	seen *sync.Map
	buf  []byte
}

func (f *questionFilter) Write(p []byte) (int, error) {
	if !strings.HasPrefix(f.Header().Get("Content-Type"), "text/event-stream") {
		return f.ResponseWriter.Write(p)
	}
	f.buf = append(f.buf, p...)
	for {
		i := bytes.Index(f.buf, []byte("\n\n"))
		if i < 0 {
			return len(p), nil
		}
		ev := f.buf[:i+2]
		f.buf = f.buf[i+2:]
		if !f.again(ev) {
			if _, err := f.ResponseWriter.Write(ev); err != nil {
				return 0, err
			}
		}
	}
}

// again reports whether an SSE event is a server→client request passed before.
func (f *questionFilter) again(ev []byte) bool {
	for _, line := range bytes.Split(ev, []byte("\n")) {
		if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			m := gjson.ParseBytes(data)
			if m.Get("method").Exists() && m.Get("id").Exists() {
				_, seen := f.seen.LoadOrStore(m.Get("id").Raw, true)
				return seen
			}
		}
	}
	return false
}

func (f *questionFilter) Flush() {
	if fl, ok := f.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}
