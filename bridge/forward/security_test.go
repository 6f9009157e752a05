package forward_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/internal/auth"
	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
	"github.com/taskbridge/taskbridge/record"
)

const (
	aliceKey = "alice-key-7f3a9c2e41d8"
	bobKey   = "bob-key-0c9e8d7f6a5b4"
	eveKey   = "eve-key-other-tenant-01"
)

// syncBuffer is an io.Writer safe for the concurrent log writes of a running bridge.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// withAuth configures API keys for alice and bob (tenant acme) and eve (tenant other).
func withAuth(t testing.TB) envOpt {
	a, err := auth.NewAPIKeys([]auth.APIKey{
		{Key: aliceKey, Principal: "alice", Tenant: "acme"},
		{Key: bobKey, Principal: "bob", Tenant: "acme"},
		{Key: eveKey, Principal: "alice", Tenant: "other"}, // same name, other tenant
	})
	if err != nil {
		t.Fatal(err)
	}
	return func(c *envConfig, _ *fixture.Options) { c.Door.Auth = a }
}

// keyed opens an initialized session under an API key.
func (e *env) keyed(key string) *legacyclient.Client {
	e.t.Helper()
	c := legacyclient.New(e.url)
	c.Header = http.Header{"Authorization": {"Bearer " + key}}
	if _, err := c.Initialize(context.Background()); err != nil {
		e.t.Fatalf("initialize as %s: %v", key[:5], err)
	}
	return c
}

// post sends one raw JSON-RPC body and returns the HTTP status and the exact reply bytes.
func post(t testing.TB, url, session, key, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func randomID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func createTask(t testing.TB, c *legacyclient.Client, tool string, args map[string]any) string {
	t.Helper()
	res := call(t.(*testing.T), c, "tools/call", map[string]any{"name": tool, "arguments": args, "task": map[string]any{}})
	id := res.Get("task.taskId").Str
	if id == "" {
		t.Fatalf("tools/call %s: no task id in %s", tool, res.Raw)
	}
	return id
}

// TestForeignTaskLooksUnknown: bob (same tenant) and eve (same principal name, other
// tenant) get byte-identical answers for alice's task id and for an id that never existed,
// for every task method; tasks/list never shows it.
func TestForeignTaskLooksUnknown(t *testing.T) {
	e := newEnv(t, withAuth(t))
	alice := e.keyed(aliceKey)
	taskID := createTask(t, alice, "long_job", map[string]any{"seconds": 600})
	done := createTask(t, alice, "slow_compute", map[string]any{"seconds": 0})
	waitStatus(t, alice, done, "completed")

	for _, key := range []string{bobKey, eveKey} {
		other := e.keyed(key)
		for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
			for _, victim := range []string{taskID, done} {
				body := func(id string) string {
					return fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":%q,"params":{"taskId":%q}}`, method, id)
				}
				st1, foreign := post(t, e.url, other.SessionID(), key, body(victim))
				st2, unknown := post(t, e.url, other.SessionID(), key, body(randomID()))
				if st1 != st2 || foreign != unknown {
					t.Errorf("%s as %s: foreign id answered %d %q, unknown id %d %q", method, key[:3], st1, foreign, st2, unknown)
				}
				if !strings.Contains(foreign, `"code":-32602`) {
					t.Errorf("%s as %s: %s, want -32602", method, key[:3], foreign)
				}
			}
		}
		list := call(t, other, "tasks/list", map[string]any{})
		if strings.Contains(list.Raw, taskID) || strings.Contains(list.Raw, done) {
			t.Errorf("tasks/list as %s shows alice's tasks: %s", key[:3], list.Raw)
		}
	}
	// alice still sees and can cancel her own task: the refusals above changed nothing.
	if s := call(t, alice, "tasks/get", id(taskID)).Get("status").Str; s != "working" {
		t.Fatalf("alice's task is %s after bob's attempts, want working", s)
	}
	if n := len(call(t, alice, "tasks/list", map[string]any{}).Get("tasks").Array()); n != 2 {
		t.Errorf("alice lists %d tasks, want 2", n)
	}
	call(t, alice, "tasks/cancel", id(taskID))
}

// TestGuessedIDsNeverHit: ids are 128-bit random hex; guesses near real ids find nothing.
func TestGuessedIDsNeverHit(t *testing.T) {
	e := newEnv(t, withAuth(t))
	alice := e.keyed(aliceKey)
	real := createTask(t, alice, "slow_compute", map[string]any{"seconds": 0})
	if len(real) < 32 {
		t.Fatalf("task id %q is shorter than 128 bits of hex", real)
	}
	guesses := []string{real[:len(real)-1] + "0", strings.ToUpper(real), real + " ", "1", "0", "' OR 1=1 --", "%", "*"}
	for range 50 {
		guesses = append(guesses, randomID())
	}
	for _, g := range guesses {
		if g == real {
			continue
		}
		err := callErr(t, alice, "tasks/get", id(g))
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("tasks/get(%q) = %v, want -32602", g, err)
		}
	}
}

// TestSessionBoundToPrincipal: a session id replayed with another key, with no key, or with
// a wrong key never reaches the session.
func TestSessionBoundToPrincipal(t *testing.T) {
	e := newEnv(t, withAuth(t))
	alice := e.keyed(aliceKey)
	taskID := createTask(t, alice, "slow_compute", map[string]any{"seconds": 0})
	get := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":%q}}`, taskID)

	stReplay, replay := post(t, e.url, alice.SessionID(), bobKey, get)
	stUnknown, unknown := post(t, e.url, "NOSUCHSESSION0000000000000", bobKey, get)
	if stReplay != http.StatusNotFound || replay != unknown || stUnknown != stReplay {
		t.Errorf("alice's session with bob's key: %d %q; unknown session: %d %q", stReplay, replay, stUnknown, unknown)
	}
	for _, key := range []string{"", "not-a-valid-key-at-all", aliceKey[:len(aliceKey)-1]} {
		st, body := post(t, e.url, alice.SessionID(), key, get)
		if st != http.StatusUnauthorized || strings.Contains(body, taskID) {
			t.Errorf("key %q: %d %s, want 401 without the task", key, st, body)
		}
	}
	// initialize without credentials is refused too.
	st, _ := post(t, e.url, "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	if st != http.StatusUnauthorized {
		t.Errorf("initialize without a key: HTTP %d, want 401", st)
	}
	// alice's own key still works on her session.
	if s := call(t, alice, "tasks/get", id(taskID)).Get("taskId").Str; s != taskID {
		t.Fatalf("alice lost her task")
	}
}

// TestSessionScopedWithoutAuth: in single-user mode a task belongs to its session.
func TestSessionScopedWithoutAuth(t *testing.T) {
	e := newEnv(t)
	a, b := e.client(), e.client()
	taskID := createTask(t, a, "slow_compute", map[string]any{"seconds": 0})
	get := fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":%q}}`, taskID)
	_, foreign := post(t, e.url, b.SessionID(), "", get)
	_, unknown := post(t, e.url, b.SessionID(), "", strings.Replace(get, taskID, randomID(), 1))
	if foreign != unknown {
		t.Errorf("other session: %q vs unknown %q", foreign, unknown)
	}
	if list := call(t, b, "tasks/list", map[string]any{}); strings.Contains(list.Raw, taskID) {
		t.Errorf("other session lists the task: %s", list.Raw)
	}
}

// TestForeignInputAnswerIgnored: bob answering the elicitation relayed to alice (he learnt
// its request id) is acknowledged exactly like an answer to an unknown request and changes
// nothing; alice's own answer is the one the upstream gets.
func TestForeignInputAnswerIgnored(t *testing.T) {
	e := newEnv(t, withAuth(t))
	alice := e.keyed(aliceKey)
	alice.Requests = make(chan *jsonrpc.Message, 4)
	bob := e.keyed(bobKey)
	taskID := createTask(t, alice, "confirm_delete", map[string]any{"filename": "report.txt"})

	type res struct {
		raw []byte
		err error
	}
	done := make(chan res, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r, err := alice.Call(ctx, "tasks/result", id(taskID))
		done <- res{r, err}
	}()
	var ask *jsonrpc.Message
	select {
	case ask = <-alice.Requests:
	case <-time.After(20 * time.Second):
		t.Fatal("no elicitation relayed to alice")
	}
	answer := func(rid string, accept bool) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"confirm":%v}}}`, rid, accept)
	}
	st1, b1 := post(t, e.url, bob.SessionID(), bobKey, answer(ask.ID.Raw(), true))
	st2, b2 := post(t, e.url, bob.SessionID(), bobKey, answer(`"tb-`+randomID()+`"`, true))
	if st1 != st2 || b1 != b2 {
		t.Errorf("bob's answer to alice's request: %d %q; to an unknown request: %d %q", st1, b1, st2, b2)
	}
	if s := call(t, alice, "tasks/get", id(taskID)).Get("status").Str; s != "input_required" {
		t.Fatalf("after bob's answer the task is %s, want still input_required", s)
	}
	if err := alice.Respond(context.Background(), ask.ID, raw(`{"action":"accept","content":{"confirm":false}}`)); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("tasks/result: %v", r.err)
	}
	if txt := gjson.GetBytes(r.raw, "content.0.text").Str; !strings.Contains(txt, "Kept report.txt") {
		t.Fatalf("result %q: want alice's answer (keep), not bob's (delete)", txt)
	}
	for k, n := range e.fx.Stats().Updates {
		if n != 1 {
			t.Errorf("upstream got %d answers for %s, want 1", n, k)
		}
	}
}

// statusCanary wraps the fixture so every upstream statusMessage carries a canary.
func statusCanary(h http.Handler, canary string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := bytes.ReplaceAll(rec.Body.Bytes(), []byte("The operation is now in progress."), []byte("in progress "+canary))
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		w.Write(body)
	})
}

// TestLogsCarryNoSecrets plants canaries in arguments, results, elicitation content (both
// directions) and status messages, runs the flows with debug logging, and checks none of
// them, nor any API key, reached the log.
func TestLogsCarryNoSecrets(t *testing.T) {
	canaries := map[string]string{
		"argument":          "CANARY-ARG-5d1f",
		"result":            "CANARY-RESULT-93ab", // slow_compute echoes its label into the result
		"elicitation":       "CANARY-ELICIT-77c2", // confirm_delete asks "Delete <filename>?"
		"elicitationAnswer": "CANARY-ANSWER-1e0d",
		"statusMessage":     "CANARY-STATUS-4b6a",
	}
	logs := &syncBuffer{}
	fx := fixture.New(fixture.Options{Scale: 0.1, PollIntervalMs: 100})
	up := httptest.NewServer(statusCanary(fx, canaries["statusMessage"]))
	t.Cleanup(func() { up.Close(); fx.Close() })
	e := &env{t: t, fx: fx, upURL: up.URL + "/mcp", dbPath: filepath.Join(t.TempDir(), "tb.db")}
	cfg := envConfig{Config: forward.Config{Logger: zerolog.New(logs).Level(zerolog.DebugLevel)}}
	cfg.Door.Logger = cfg.Logger // the door's log lines are checked too
	withAuth(t)(&cfg, nil)
	e.start(cfg)

	alice := e.keyed(aliceKey)
	alice.Requests = make(chan *jsonrpc.Message, 4)
	t1 := createTask(t, alice, "slow_compute", map[string]any{"seconds": 1, "label": canaries["result"] + " " + canaries["argument"]})
	get := call(t, alice, "tasks/get", id(t1))
	if !strings.Contains(get.Raw, canaries["statusMessage"]) {
		t.Fatalf("status canary not planted: %s", get.Raw) // the canary must really flow
	}
	if r := call(t, alice, "tasks/result", id(t1)); !strings.Contains(r.Raw, canaries["result"]) {
		t.Fatalf("result canary not planted: %s", r.Raw)
	}
	t2 := createTask(t, alice, "confirm_delete", map[string]any{"filename": canaries["elicitation"]})
	go func() {
		m := <-alice.Requests
		if !strings.Contains(string(m.Params), canaries["elicitation"]) {
			t.Errorf("elicitation canary not planted: %s", m.Params)
		}
		alice.Respond(context.Background(), m.ID, raw(`{"action":"accept","content":{"confirm":true,"note":"`+canaries["elicitationAnswer"]+`"}}`))
	}()
	call(t, alice, "tasks/result", id(t2))
	// Failures log too: a foreign principal, a bad key, an unknown input answer.
	post(t, e.url, alice.SessionID(), bobKey, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"`+t1+`"}}`)
	post(t, e.url, alice.SessionID(), "wrong-"+aliceKey, `{"jsonrpc":"2.0","id":1,"method":"tasks/list"}`)
	post(t, e.url, alice.SessionID(), aliceKey, `{"jsonrpc":"2.0","id":"tb-x","result":{"action":"accept","content":{"x":"`+canaries["elicitationAnswer"]+`"}}}`)
	e.b.Close(context.Background())

	out := logs.String()
	if !strings.Contains(out, `"level":`) {
		t.Fatalf("nothing was logged; the capture does not work: %q", out)
	}
	for what, c := range canaries {
		if strings.Contains(out, c) {
			t.Errorf("the %s canary %q appears in the log", what, c)
		}
	}
	for _, k := range []string{aliceKey, bobKey, "wrong-" + aliceKey} {
		if strings.Contains(out, k) {
			t.Errorf("an API key appears in the log")
		}
	}
}

// waitStatus polls tasks/get until the task has status want.
func waitStatus(t *testing.T, c *legacyclient.Client, taskID, want string) gjson.Result {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := call(t, c, "tasks/get", id(taskID))
		if r.Get("status").Str == want {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %s, want %s: %s", taskID, r.Get("status").Str, want, r.Raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func jsonErr(t *testing.T, err error) *jsonrpc.Error {
	t.Helper()
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		t.Fatalf("want a JSON-RPC error, got %v", err)
	}
	return je
}

// TestIdempotencyKey: the same key from the same principal returns the task it made (one
// upstream execution), through the header or _meta; another principal's key is its own;
// the key reused for a different call is refused.
func TestIdempotencyKey(t *testing.T) {
	e := newEnv(t, withAuth(t))
	alice := e.keyed(aliceKey)
	alice.Header.Set("Idempotency-Key", "order-42")
	args := map[string]any{"seconds": 0, "label": "x"}
	first := createTask(t, alice, "slow_compute", args)
	alice2 := e.keyed(aliceKey) // another session of the same principal
	alice2.Header.Set("Idempotency-Key", "order-42")
	if again := createTask(t, alice2, "slow_compute", args); again != first {
		t.Fatalf("same key, new session: task %s, want %s", again, first)
	}
	meta := call(t, e.keyed(aliceKey), "tools/call", map[string]any{"name": "slow_compute", "arguments": args, "task": map[string]any{},
		"_meta": map[string]any{"taskbridge/idempotency-key": "order-42"}}).Get("task.taskId").Str
	if meta != first {
		t.Fatalf("same key in _meta: task %s, want %s", meta, first)
	}
	bob := e.keyed(bobKey)
	bob.Header = http.Header{"Authorization": {"Bearer " + bobKey}, "Idempotency-Key": {"order-42"}}
	if theirs := createTask(t, bob, "slow_compute", args); theirs == first {
		t.Fatalf("bob's key order-42 returned alice's task")
	}
	err := callErr(t, alice, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 0, "label": "y"}, "task": map[string]any{}})
	if je := jsonErr(t, err); je.Code != jsonrpc.CodeInvalidParams || !strings.Contains(je.Message, "different call") {
		t.Fatalf("key reused with other arguments: %v", err)
	}
	waitStatus(t, alice, first, "completed")
	if n := e.fx.Stats().Executions["slow_compute"]; n != 2 {
		t.Fatalf("upstream ran slow_compute %d times, want 2 (alice once, bob once)", n)
	}
}

// TestUnknownIntentBlocksRetry: an intent left without an upstream id by a crash becomes an
// unknown outcome at restart; a retry with its key is refused (never re-executed) until an
// operator reconciles it; "did not run" releases the key.
func TestUnknownIntentBlocksRetry(t *testing.T) {
	e := newEnv(t, withAuth(t))
	ctx := context.Background()
	alice := e.keyed(aliceKey)
	owner := "principal:" + auth.Principal{ID: "alice", Tenant: "acme"}.Key()
	// What a crash between the intent and the upstream reply leaves behind.
	now := time.Now().UTC()
	ttl := int64(60_000)
	intent := &record.Task{ID: randomID(), Owner: owner, SessionID: alice.SessionID(), RequestID: "99", IdempotencyKey: "pay-1",
		Origin: e.upURL, Mode: record.ModeTranslate, Tool: "slow_compute", ArgsHash: argsHashOf(`{"seconds":0}`),
		Status: record.StatusWorking, CreatedAt: now, LastUpdatedAt: now, TTLMs: &ttl, PollIntervalMs: 100, Outcome: record.OutcomePending}
	if err := e.st.CreateTask(ctx, intent); err != nil {
		t.Fatal(err)
	}
	e.start(envConfig{Config: forward.Config{Logger: zerolog.Nop()}, Door: bridge.DoorConfig{Auth: authOf(t)}}) // the restart
	alice = e.keyed(aliceKey)
	alice.Header.Set("Idempotency-Key", "pay-1")
	params := map[string]any{"name": "slow_compute", "arguments": raw(`{"seconds":0}`), "task": map[string]any{}}
	err := callErr(t, alice, "tools/call", params)
	if je := jsonErr(t, err); je.Code != jsonrpc.CodeOutcomeUnknown || gjson.GetBytes(je.Data, "outcome").Str != "unknown" {
		t.Fatalf("retry of an unknown intent: %v %s", err, je.Data)
	}
	if s := call(t, alice, "tasks/get", id(intent.ID)); s.Get("status").Str != "failed" || !strings.Contains(s.Get("statusMessage").Str, "unknown") {
		t.Fatalf("the intent after restart: %s", s.Raw)
	}
	if n := e.fx.Stats().Executions["slow_compute"]; n != 0 {
		t.Fatalf("upstream ran %d times before reconciliation", n)
	}
	if _, err := forward.Reconcile(ctx, e.st, intent.ID, false, "checked the payment log", time.Now()); err != nil {
		t.Fatal(err)
	}
	fresh := createTask(t, alice, "slow_compute", map[string]any{"seconds": 0})
	if fresh == intent.ID {
		t.Fatal("retry after reconciliation returned the old intent")
	}
	waitStatus(t, alice, fresh, "completed")
	rec, _ := e.st.GetTask(ctx, intent.ID)
	if rec.Outcome != record.OutcomeFailed || !strings.Contains(rec.OutcomeDetail, "checked the payment log") {
		t.Fatalf("reconciled record: outcome %s detail %q", rec.Outcome, rec.OutcomeDetail)
	}
	if _, err := forward.Reconcile(ctx, e.st, intent.ID, true, "again", time.Now()); err == nil {
		t.Fatal("reconciling twice: want an error")
	}
}

func authOf(t *testing.T) auth.Authenticator {
	var c envConfig
	withAuth(t)(&c, nil)
	return c.Door.Auth
}

// argsHashOf is the bridge's audit hash of raw arguments (hex sha-256).
func argsHashOf(args string) string {
	return sha256Hex([]byte(args))
}

// TestLimits: per-principal concurrent tasks, request rate and result size.
func TestLimits(t *testing.T) {
	t.Run("concurrent", func(t *testing.T) {
		e := newEnv(t, withAuth(t), func(c *envConfig, _ *fixture.Options) { c.Policy.MaxConcurrentTasks = 1 })
		alice := e.keyed(aliceKey)
		first := createTask(t, alice, "long_job", map[string]any{"seconds": 600})
		err := callErr(t, alice, "tools/call", map[string]any{"name": "long_job", "arguments": map[string]any{"seconds": 600}, "task": map[string]any{}})
		if je := jsonErr(t, err); je.Code != jsonrpc.CodeOverloaded || !strings.Contains(je.Message, "limit 1") {
			t.Fatalf("second task: %v", err)
		}
		createTask(t, e.keyed(bobKey), "long_job", map[string]any{"seconds": 600}) // bob has his own cap
		call(t, alice, "tasks/cancel", id(first))
		createTask(t, alice, "slow_compute", map[string]any{"seconds": 0}) // room again
	})
	t.Run("rate", func(t *testing.T) {
		e := newEnv(t, withAuth(t), func(c *envConfig, _ *fixture.Options) { c.Door.RequestRate, c.Door.RequestBurst = 0.001, 3 })
		alice := e.keyed(aliceKey)
		var err error
		for i := 0; i < 4 && err == nil; i++ {
			_, err = alice.Call(context.Background(), "tasks/list", map[string]any{})
		}
		if je := jsonErr(t, err); je.Code != jsonrpc.CodeOverloaded || !gjson.GetBytes(je.Data, "retryAfterMs").Exists() {
			t.Fatalf("4th request: %v", err)
		}
		call(t, e.keyed(bobKey), "tasks/list", map[string]any{}) // bob is not throttled by alice
	})
	t.Run("resultBytes", func(t *testing.T) {
		e := newEnv(t, withAuth(t), func(c *envConfig, _ *fixture.Options) { c.MaxResultBytes = 64 })
		alice := e.keyed(aliceKey)
		taskID := createTask(t, alice, "slow_compute", map[string]any{"seconds": 0, "label": strings.Repeat("x", 200)})
		r := waitStatus(t, alice, taskID, "failed")
		if !strings.Contains(r.Get("statusMessage").Str, "exceeds the bridge's limit of 64 bytes") {
			t.Fatalf("statusMessage %q", r.Get("statusMessage").Str)
		}
		err := callErr(t, alice, "tasks/result", id(taskID))
		if je := jsonErr(t, err); !strings.Contains(je.Message, "limit") {
			t.Fatalf("tasks/result: %v", err)
		}
	})
}

// TestTTLPurge: past its ttl a task answers -32602 like an unknown one; the purge drops the
// payload and keeps the audit part.
func TestTTLPurge(t *testing.T) {
	// A clock the test moves forward, so the ttl passes when the test says so and not
	// when a loaded machine happens to be slow.
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	e := newEnv(t, withAuth(t), func(c *envConfig, _ *fixture.Options) {
		c.PurgeInterval = 50 * time.Millisecond
		c.Now = now
	})
	alice := e.keyed(aliceKey)
	res := call(t, alice, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 0, "label": "L"}, "task": map[string]any{"ttl": 60000}})
	taskID := res.Get("task.taskId").Str
	waitStatus(t, alice, taskID, "completed")
	if rec, err := e.st.GetTask(context.Background(), taskID); err != nil || rec.Result == nil {
		t.Fatalf("payload purged before the ttl: %+v, %v", rec, err)
	}
	skew.Store(int64(61 * time.Second))
	deadline := time.Now().Add(20 * time.Second)
	for {
		rec, err := e.st.GetTask(context.Background(), taskID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Result == nil && rec.StatusMessage == "" {
			if rec.Tool != "slow_compute" || rec.ArgsHash == "" || rec.Outcome != record.OutcomeSucceeded || rec.Owner == "" {
				t.Fatalf("audit part lost: %+v", rec)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("payload not purged: %+v", rec)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if je := jsonErr(t, callErr(t, alice, "tasks/get", id(taskID))); je.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("expired task: %v", je)
	}
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
