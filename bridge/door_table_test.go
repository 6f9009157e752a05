package bridge_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// doorRow is one route × transport the door serves: how to build it (a real upstream, the
// engine, the door with API keys) and how a client reaches it. na names the checks that do
// not apply to the row, each with the reason the test prints.
type doorRow struct {
	route     bridge.Route
	transport bridge.Transport
	harness   func(*testing.T, tableOpts) *harness
	dial      func(*harness, string) (tableClient, error)
	na        map[string]string
}

// modernClientNA: the related-task _meta is a 2025-11-25 key; a 2026-07-28 client names
// tasks by params only.
var modernClientNA = map[string]string{"forged related-task": "a 2026-07-28 client: the related-task _meta is a 2025-11-25 key (the screen is on the 2025-11-25 face)"}

var stdioNoCredentials = "stdio carries no credentials: whoever starts the process is its user, and its session's principal is stdio_principal"

// doorRows is the table. bridge.Routes() lists what the door dispatches to; a route there
// without a row here fails TestFrontDoorTable.
var doorRows = []doorRow{
	{bridge.RouteForward, bridge.TransportHTTP, forwardHarness, dialLegacyHTTP, nil},
	{bridge.RouteForward, bridge.TransportWebSocket, forwardHarness, dialWebSocket, nil},
	{bridge.RouteForward, bridge.TransportStdio, forwardHarness, dialStdio,
		map[string]string{"no credentials": stdioNoCredentials, "wrong key": stdioNoCredentials}},
	{bridge.RouteModernPassThrough, bridge.TransportHTTP, forwardHarness, dialModern, modernClientNA},
	{bridge.RouteReverse, bridge.TransportHTTP, reverseHarness, dialModern, modernClientNA},
	{bridge.RouteLegacyPassThrough, bridge.TransportHTTP, reverseHarness, dialLegacyHTTP, nil},
	{bridge.RouteLegacyPassThrough, bridge.TransportWebSocket, reverseHarness, dialWebSocket, nil},
	{bridge.RouteLegacyPassThrough, bridge.TransportStdio, reverseHarness, dialStdio,
		map[string]string{"no credentials": stdioNoCredentials, "wrong key": stdioNoCredentials}},
}

// doorChecks run on every row.
var doorChecks = []struct {
	name string
	run  func(*testing.T, doorRow, *refusals)
}{
	{"no credentials", func(t *testing.T, r doorRow, seen *refusals) { checkUnauthenticated(t, r, "", seen) }},
	{"wrong key", func(t *testing.T, r doorRow, seen *refusals) {
		checkUnauthenticated(t, r, "wrong-key-0123456789abcdef", seen)
	}},
	{"kill switch", checkKillSwitch},
	{"drain", checkDrain},
	{"rate limit", checkRateLimit},
	{"concurrency cap", checkConcurrencyCap},
	{"forged related-task", checkForgedRelatedTask},
}

// TestFrontDoorTable runs the same checks over every route × transport the bridge serves:
// without credentials or with a wrong key the request is refused and nothing reaches the
// upstream; with the kill switch on or while draining no new task starts; the rate limit
// and the concurrency cap hold. Every refusal carries the same code and reason on every
// row, and every 401 is byte for byte the same.
func TestFrontDoorTable(t *testing.T) {
	checkTableCoversRoutes(t)
	seen := &refusals{}
	for _, row := range doorRows {
		t.Run(string(row.route)+"/"+string(row.transport), func(t *testing.T) {
			for _, c := range doorChecks {
				t.Run(c.name, func(t *testing.T) {
					if why, ok := row.na[c.name]; ok {
						t.Logf("not applicable: %s", why)
						return
					}
					c.run(t, row, seen)
				})
			}
		})
	}
	seen.sameEverywhere(t)
}

// TestFrontDoorTableCoversEveryRoute: every route × transport the door can dispatch to has
// a row, and no row names one it cannot.
func TestFrontDoorTableCoversEveryRoute(t *testing.T) { checkTableCoversRoutes(t) }

func checkTableCoversRoutes(t *testing.T) {
	t.Helper()
	rows := map[bridge.Dispatch]bool{}
	for _, r := range doorRows {
		rows[bridge.Dispatch{Route: r.route, Transport: r.transport}] = true
	}
	served := map[bridge.Dispatch]bool{}
	for _, d := range bridge.Routes() {
		served[d] = true
		if !rows[d] {
			t.Errorf("route %s over %s is served by the door but has no row in the front-door table (door_table_test.go)", d.Route, d.Transport)
		}
	}
	for d := range rows {
		if !served[d] {
			t.Errorf("the table has a row for %s over %s, which the door does not serve", d.Route, d.Transport)
		}
	}
}

// refusals collects the 401 answers of every row, to compare them.
type refusals struct {
	bodies      map[string]string // row → body
	challenges  map[string]string // row → WWW-Authenticate
	statusCodes map[string]int
}

func (s *refusals) add(row, body, challenge string, status int) {
	if s.bodies == nil {
		s.bodies, s.challenges, s.statusCodes = map[string]string{}, map[string]string{}, map[string]int{}
	}
	s.bodies[row], s.challenges[row], s.statusCodes[row] = body, challenge, status
}

func (s *refusals) sameEverywhere(t *testing.T) {
	var first string
	for row, body := range s.bodies {
		if first == "" {
			first = row
		}
		if body != s.bodies[first] || s.challenges[row] != s.challenges[first] || s.statusCodes[row] != http.StatusUnauthorized {
			t.Errorf("401 differs: %s answered %d %q (%s), %s answered %d %q (%s)", row, s.statusCodes[row], body, s.challenges[row],
				first, s.statusCodes[first], s.bodies[first], s.challenges[first])
		}
	}
	if len(s.bodies) < 2 {
		t.Errorf("only %d rows recorded a 401", len(s.bodies))
	}
}

// rawAttempt is what an attacker sends on the row's transport: the request that used to
// be served without a key (a modern tools/call; a WebSocket upgrade; a legacy initialize
// and a task-augmented tools/call in a made-up session).
func rawAttempt(t *testing.T, row doorRow, h *harness, key string) []*http.Response {
	t.Helper()
	send := func(method string, hdr map[string]string, body string) *http.Response {
		req, _ := http.NewRequest(method, h.url, strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t.Cleanup(cancel)
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		return resp
	}
	legacyHdr := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	switch {
	case row.transport == bridge.TransportWebSocket:
		return []*http.Response{send(http.MethodGet, map[string]string{"Connection": "Upgrade", "Upgrade": "websocket",
			"Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol": "mcp"}, "")}
	case row.route == bridge.RouteModernPassThrough || row.route == bridge.RouteReverse:
		return []*http.Response{send(http.MethodPost, map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": h.taskTool},
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+h.taskTool+`","arguments":`+h.taskArgs+
				`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`)}
	default:
		sessHdr := map[string]string{"Mcp-Session-Id": "MADEUPSESSION0000000000000", "MCP-Protocol-Version": "2025-11-25"}
		for k, v := range legacyHdr {
			sessHdr[k] = v
		}
		return []*http.Response{
			send(http.MethodPost, legacyHdr, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`),
			send(http.MethodPost, sessHdr, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+h.taskTool+`","arguments":`+h.taskArgs+`,"task":{}}}`),
		}
	}
}

// checkUnauthenticated: without a key (or with a wrong one) every attempt is 401 and the
// upstream hears nothing at all.
func checkUnauthenticated(t *testing.T, row doorRow, key string, seen *refusals) {
	h := row.harness(t, tableOpts{})
	before := h.upReqs()
	for _, resp := range rawAttempt(t, row, h, key) {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s %s: HTTP %d %s, want 401", resp.Request.Method, row.transport, resp.StatusCode, b)
		}
		seen.add(string(row.route)+"/"+string(row.transport), string(b), resp.Header.Get("WWW-Authenticate"), resp.StatusCode)
	}
	c, err := row.dial(h, key)
	if err == nil {
		err = c.startTask(context.Background())
	}
	if err == nil {
		t.Fatalf("a client with key %q started a task", key)
	}
	if n := h.upReqs() - before; n != 0 {
		t.Errorf("%d requests reached the upstream without valid credentials", n)
	}
	if n := h.upTasks(); n != 0 {
		t.Errorf("the upstream started %d tasks", n)
	}
}

// wantRefusal checks err is the gate's (or the door's) refusal with code and reason.
func wantRefusal(t *testing.T, err error, code int64, reason string) *jsonrpc.Error {
	t.Helper()
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		t.Fatalf("want a JSON-RPC refusal %d %s, got %v", code, reason, err)
	}
	if je.Code != code || gjson.GetBytes(je.Data, "reason").Str != reason {
		t.Fatalf("refusal: %d %q data %s, want code %d reason %q", je.Code, je.Message, je.Data, code, reason)
	}
	return je
}

func dialOK(t *testing.T, row doorRow, h *harness, key string) tableClient {
	t.Helper()
	c, err := row.dial(h, key)
	if err != nil {
		t.Fatalf("dial with %s: %v", key[:3], err)
	}
	return c
}

func ctx20(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// checkKillSwitch: the kill switch, turned on at runtime (Gate.SetPolicy), refuses every
// new task with -32012 kill_switch before the upstream starts one; other requests work.
func checkKillSwitch(t *testing.T, row doorRow, _ *refusals) {
	h := row.harness(t, tableOpts{})
	c := dialOK(t, row, h, aliceKey)
	h.gate.SetPolicy(bridge.Policy{KillSwitch: true})
	wantRefusal(t, c.startTask(ctx20(t)), jsonrpc.CodeTasksRefused, "kill_switch")
	if n := h.upTasks(); n != 0 {
		t.Errorf("the upstream started %d tasks with the kill switch on", n)
	}
	if err := c.cheap(ctx20(t)); err != nil {
		t.Errorf("a request that starts nothing, with the kill switch on: %v", err)
	}
}

// checkDrain: while draining, a new task is refused with -32011 draining (retryable
// elsewhere) before the upstream starts one.
func checkDrain(t *testing.T, row doorRow, _ *refusals) {
	h := row.harness(t, tableOpts{})
	c := dialOK(t, row, h, aliceKey)
	h.draining.Store(true)
	wantRefusal(t, c.startTask(ctx20(t)), jsonrpc.CodeOverloaded, "draining")
	if n := h.upTasks(); n != 0 {
		t.Errorf("the upstream started %d tasks while draining", n)
	}
}

// checkRateLimit: with a burst of 6 and (practically) no refill, a client is refused within
// a few requests with -32011 request_rate and retryAfterMs; another principal is not.
func checkRateLimit(t *testing.T, row doorRow, _ *refusals) {
	h := row.harness(t, tableOpts{rate: 0.001, burst: 6})
	c := dialOK(t, row, h, aliceKey)
	var err error
	for i := 0; i < 10 && err == nil; i++ {
		err = c.cheap(ctx20(t))
	}
	je := wantRefusal(t, err, jsonrpc.CodeOverloaded, "request_rate")
	if ms := gjson.GetBytes(je.Data, "retryAfterMs").Int(); ms <= 0 {
		t.Errorf("rate refusal without retryAfterMs: %s", je.Data)
	}
	if row.transport == bridge.TransportStdio {
		return // one process, one principal: there is no other caller to compare with
	}
	if err := dialOK(t, row, h, bobKey).cheap(ctx20(t)); err != nil {
		t.Errorf("bob is throttled by alice's requests: %v", err)
	}
}

// checkConcurrencyCap: with max_concurrent_tasks 1 a principal's second unfinished task is
// refused with -32011 max_concurrent_tasks; the upstream started only the first; another
// principal has a cap of its own.
func checkConcurrencyCap(t *testing.T, row doorRow, _ *refusals) {
	h := row.harness(t, tableOpts{policy: bridge.Policy{MaxConcurrentTasks: 1}})
	c := dialOK(t, row, h, aliceKey)
	if err := c.startTask(ctx20(t)); err != nil {
		t.Fatalf("first task: %v", err)
	}
	wantRefusal(t, c.startTask(ctx20(t)), jsonrpc.CodeOverloaded, "max_concurrent_tasks")
	if n := h.upTasks(); n != 1 {
		t.Errorf("the upstream started %d tasks, want 1", n)
	}
	if row.transport == bridge.TransportStdio {
		return
	}
	if err := dialOK(t, row, h, bobKey).startTask(ctx20(t)); err != nil {
		t.Errorf("bob's first task: %v", err)
	}
}

// checkForgedRelatedTask: a request whose related-task _meta names a task the caller does
// not own reaches the upstream without it (bridge/internal/relatedtask; the rest of the
// request arrives).
func checkForgedRelatedTask(t *testing.T, row doorRow, _ *refusals) {
	h := row.harness(t, tableOpts{})
	c := dialOK(t, row, h, aliceKey)
	const forged, marker = "not-alices-task-5f2c", "forged-check-7a1d"
	p := `{"name":"` + h.quick + `","arguments":{},"_meta":{"progressToken":"` + marker +
		`","io.modelcontextprotocol/related-task":{"taskId":"` + forged + `"}}}`
	if _, err := c.call(ctx20(t), "tools/call", p); err != nil {
		t.Fatalf("tools/call with a forged related-task: %v", err)
	}
	if !h.upSaw(marker) {
		t.Fatal("the call never reached the upstream")
	}
	// (the legacy pass-through may ask the upstream about the id with a tasks/get of its
	// own: the ownership lookup; that request carries no related-task)
	if h.upSaw("related-task", forged) {
		t.Errorf("the upstream received the forged related-task naming %s", forged)
	}
}
