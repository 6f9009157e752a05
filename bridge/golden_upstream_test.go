package bridge_test

// The golden runner's scripted upstreams (golden_test.go): one script (the transcript's
// "-- upstream --" steps) and the two servers that follow it, a 2026-07-28 one
// (modernUpstream: forward route, modern pass-through) and a 2025-11-25 one with sessions
// (legacyUpstream: reverse route, legacy pass-through).

import (
	"context"
	"fmt"
	"github.com/tidwall/gjson"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskbridge/taskbridge/sep2663"
)

// script is the upstream section being played. mu guards every field below it; changed
// is broadcast whenever a step is used up (requests that wait for their step recheck).
type script struct {
	tr       *transcript
	vars     *vars
	scripted map[string]bool // methods the script has steps for
	done     chan struct{}   // closed when every step is used up

	mu      sync.Mutex
	changed *sync.Cond
	next    int
	last    map[string]string // "method taskId" → the reply last given (repeated for polls)
	errs    []string
}

// errUnexpected is the upstream's answer to a request its script does not allow.
const errUnexpected = `{"jsonrpc":"2.0","error":{"code":-32603,"message":"golden upstream: unexpected request"}}`

func newScript(tr *transcript, v *vars) *script {
	s := &script{tr: tr, vars: v, done: make(chan struct{}), last: map[string]string{}, scripted: map[string]bool{}}
	s.changed = sync.NewCond(&s.mu)
	for _, st := range tr.up {
		if m, _ := st.expect.(map[string]any); m != nil {
			s.scripted[fmt.Sprint(m["method"])] = true
		}
	}
	if len(tr.up) == 0 {
		close(s.done)
	}
	return s
}

// answer consumes the current step when the request matches it. A request that does not
// match gets, by method: a tasks/get (a poll whose timing the transcript cannot know) the
// reply last given for that task; a held request (the legacy tasks/result the bridge keeps
// open) waits until its step comes up; anything else is a failure. ctx ends a wait.
func (s *script) answer(ctx context.Context, method string, msg map[string]any, held bool) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	params, _ := msg["params"].(map[string]any)
	key := method + " " + fmt.Sprint(params["taskId"])
	deadline := time.Now().Add(goldenWait)
	stop := context.AfterFunc(ctx, func() { s.mu.Lock(); s.changed.Broadcast(); s.mu.Unlock() })
	defer stop()
	for {
		var diffs []string
		if s.next < len(s.tr.up) {
			st := s.tr.up[s.next]
			if diffs = s.vars.match(st.expect, msg, true, false); len(diffs) == 0 {
				return s.consume(st, key)
			}
		}
		if r, ok := s.last[key]; ok && method == "tasks/get" {
			return r
		}
		if held && ctx.Err() == nil && s.next < len(s.tr.up) && time.Now().Before(deadline) {
			waitFor(s.changed, deadline)
			continue
		}
		if held && ctx.Err() != nil {
			return errUnexpected // the bridge gave up on it (closing): not a failure of the script
		}
		where := "after the last step"
		if s.next < len(s.tr.up) {
			where = fmt.Sprintf("at step line %d: %s", s.tr.up[s.next].line+1, strings.Join(diffs, "; "))
		}
		s.errs = append(s.errs, fmt.Sprintf("unexpected upstream request %s\n\t%s", compact(msg), where))
		return errUnexpected
	}
}

// tryStep consumes the current step when msg matches it; false (and nothing recorded)
// otherwise.
func (s *script) tryStep(method string, msg map[string]any) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next >= len(s.tr.up) {
		return "", false
	}
	st := s.tr.up[s.next]
	if len(s.vars.match(st.expect, msg, true, false)) > 0 {
		return "", false
	}
	params, _ := msg["params"].(map[string]any)
	return s.consume(st, method+" "+fmt.Sprint(params["taskId"])), true
}

// consume uses up step st (s.mu held) and returns its reply.
func (s *script) consume(st upStep, key string) string {
	reply, err := s.vars.subst(st.reply)
	if err != nil {
		s.errs = append(s.errs, fmt.Sprintf("%s:%d: reply: %v", s.tr.path, st.line+1, err))
		reply = errUnexpected
	}
	s.last[key] = reply
	if s.next++; s.next == len(s.tr.up) {
		close(s.done)
	}
	s.changed.Broadcast()
	return reply
}

// waitFor waits on c (its lock held) until it is signalled or deadline passes.
func waitFor(c *sync.Cond, deadline time.Time) {
	t := time.AfterFunc(time.Until(deadline), func() { c.L.Lock(); c.Broadcast(); c.L.Unlock() })
	c.Wait()
	t.Stop()
}

func (s *script) fail(format string, args ...any) {
	s.mu.Lock()
	s.errs = append(s.errs, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

func (s *script) report(t *testing.T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.errs {
		t.Error(e)
	}
}

// reply writes the JSON-RPC response to id: reply is a result, or a whole message (an
// error) when it has a top-level "jsonrpc" member.
func reply(w http.ResponseWriter, id any, reply string) {
	out := `{"jsonrpc":"2.0","id":` + compact(id) + `,"result":` + reply + `}`
	if m, ok := decodeJSON(reply).(map[string]any); ok && m["jsonrpc"] != nil {
		m["id"] = id
		out = compact(m)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, out)
}

// readMessage reads one JSON-RPC message of a POST; nil (after failing the script) when
// the body is not one.
func (s *script) readMessage(w http.ResponseWriter, r *http.Request) (map[string]any, string) {
	body, _ := io.ReadAll(r.Body)
	msg, _ := decodeJSON(string(body)).(map[string]any)
	method, _ := msg["method"].(string)
	_, isResponse := msg["result"]
	if _, isErr := msg["error"]; msg == nil || (method == "" && !isResponse && !isErr) {
		s.fail("upstream got a POST that is not a JSON-RPC message: %s", body)
		http.Error(w, "bad request", http.StatusBadRequest)
		return nil, ""
	}
	return msg, method
}

// ---- the 2026-07-28 upstream ---------------------------------------------------------

// modernUpstream is a 2026-07-28 Streamable HTTP endpoint following the script.
type modernUpstream struct{ *script }

const defaultDiscover = `{"resultType":"complete","supportedVersions":["2026-07-28"],` +
	`"capabilities":{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}},` +
	`"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"golden-upstream","version":"1.0.0"}},` +
	`"ttlMs":3600000,"cacheScope":"public"}`

func (u modernUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	msg, method := u.readMessage(w, r)
	if msg == nil {
		return
	}
	u.checkHeaders(r, method, msg)
	withParamHeaders(r, msg)
	id, isRequest := msg["id"]
	if !isRequest {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	switch {
	case method == sep2663.MethodSubscriptionsListen && !u.scripted[method]:
		// No push from this upstream (a listen stream cannot be scripted yet): the
		// 2026-07-28 answer to an unimplemented method, so the bridge polls.
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+compact(id)+`,"error":{"code":-32601,"message":"Method not found"}}`)
	case method == sep2663.MethodDiscover && !u.scripted[method]:
		reply(w, id, defaultDiscover)
	case method == "tools/list" && !u.scripted[method]:
		// The forward route lists the tools to learn their x-mcp-header parameters; a
		// script that does not care gets none.
		reply(w, id, `{"resultType":"complete","tools":[]}`)
	default:
		reply(w, id, u.answer(r.Context(), method, msg, false))
	}
}

// withParamHeaders adds the request's Mcp-Param-* headers to msg as the pseudo-member
// "$headers" (canonical names → value), so a step can pin them like body members; a
// request without any has no "$headers" ("$headers":"$ABSENT" pins that).
func withParamHeaders(r *http.Request, msg map[string]any) {
	hs := map[string]any{}
	for k, vs := range r.Header {
		if strings.HasPrefix(k, sep2663.HeaderParamPrefix) {
			hs[k] = strings.Join(vs, ", ")
		}
	}
	if len(hs) > 0 {
		msg["$headers"] = hs
	}
}

// checkHeaders enforces the 2026-07-28 HTTP rules the bridge must follow on every POST.
func (u modernUpstream) checkHeaders(r *http.Request, method string, msg map[string]any) {
	if v := r.Header.Get(sep2663.HeaderProtocolVersion); v != sep2663.ProtocolVersion {
		u.fail("%s: MCP-Protocol-Version header %q", method, v)
	}
	if v := r.Header.Get(sep2663.HeaderMethod); v != method {
		u.fail("%s: Mcp-Method header %q", method, v)
	}
	params, _ := msg["params"].(map[string]any)
	meta, _ := params["_meta"].(map[string]any)
	if meta[sep2663.MetaProtocolVersion] != sep2663.ProtocolVersion || meta[sep2663.MetaClientCapabilities] == nil {
		u.fail("%s: params._meta lacks the protocol version or the client capabilities: %s", method, compact(meta))
	}
	field := map[string]string{"tools/call": "name", "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}[method]
	if name, _ := params[field].(string); field != "" && r.Header.Get(sep2663.HeaderName) != sep2663.EncodeHeaderValue(name) {
		u.fail("%s: Mcp-Name header %q, want %q", method, r.Header.Get(sep2663.HeaderName), name)
	}
}

// ---- the 2025-11-25 upstream ---------------------------------------------------------

// legacyUpstream is a 2025-11-25 Streamable HTTP endpoint with sessions following the
// script. An initialize or tools/list that matches the current step uses it up; any other
// gets the reply last given for that method, or the default (the routes open sessions of
// their own: the reverse route's pooled session, which also lists the tools, comes first);
// notifications are accepted; tasks/result is held until its step comes up. mu guards
// sessions.
type legacyUpstream struct {
	*script
	mu       sync.Mutex
	sessions map[string]string // Mcp-Session-Id → negotiated protocol version
}

const (
	defaultLegacyInitialize = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{},` +
		`"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}},` +
		`"serverInfo":{"name":"golden-legacy-upstream","version":"1.0.0"}}`
	defaultLegacyTools = `{"tools":[` +
		`{"name":"slow_echo","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}},` +
		`{"name":"echo","inputSchema":{"type":"object"}}]}`
)

func newLegacyUpstream(s *script) *legacyUpstream {
	return &legacyUpstream{script: s, sessions: map[string]string{}}
}

func (u *legacyUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		w.WriteHeader(http.StatusOK) // a client ending its session
		return
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	msg, method := u.readMessage(w, r)
	if msg == nil {
		return
	}
	id, isRequest := msg["id"]
	if method == "initialize" {
		u.initialize(w, r, id, msg)
		return
	}
	u.checkSession(r, method)
	switch {
	case !isRequest || method == "":
		w.WriteHeader(http.StatusAccepted) // a notification, or the answer to a server request
	case method == "tools/list":
		reply(w, id, u.perSession(method, msg, defaultLegacyTools))
	default:
		reply(w, id, u.answer(r.Context(), method, msg, method == "tasks/result"))
	}
}

// perSession answers a request every session makes (initialize, tools/list): the current
// step when it matches, else the reply last given for the method, else def.
func (u *legacyUpstream) perSession(method string, msg map[string]any, def string) string {
	if res, ok := u.tryStep(method, msg); ok {
		return res
	}
	if res := u.repeat(method); res != "" {
		return res
	}
	return def
}

// initialize opens a session (Mcp-Session-Id "gs-N"), with the scripted reply if any.
func (u *legacyUpstream) initialize(w http.ResponseWriter, r *http.Request, id any, msg map[string]any) {
	res := u.perSession("initialize", msg, defaultLegacyInitialize)
	version := gjson.Get(res, "protocolVersion").Str
	u.mu.Lock()
	sid := fmt.Sprintf("gs-%d", len(u.sessions)+1)
	u.sessions[sid] = version
	u.mu.Unlock()
	w.Header().Set("Mcp-Session-Id", sid)
	reply(w, id, res)
}

// repeat is the reply last given for a method answered per session ("" before the first).
func (u *legacyUpstream) repeat(method string) string {
	u.script.mu.Lock()
	defer u.script.mu.Unlock()
	return u.last[method+" <nil>"]
}

// checkSession enforces the 2025-11-25 session rules on a request after initialize.
func (u *legacyUpstream) checkSession(r *http.Request, method string) {
	sid := r.Header.Get("Mcp-Session-Id")
	u.mu.Lock()
	version, ok := u.sessions[sid]
	u.mu.Unlock()
	switch {
	case !ok:
		u.fail("%s: Mcp-Session-Id %q is not a session of this upstream", method, sid)
	case r.Header.Get("MCP-Protocol-Version") != version:
		u.fail("%s: MCP-Protocol-Version header %q, want %q", method, r.Header.Get("MCP-Protocol-Version"), version)
	}
}
