package bridge_test

// The golden-transcript runner: each testdata/forward/*.txtar file is one real exchange
// between a legacy (2025-11-25) client, the bridge, and a scripted 2026-07-28 upstream.
// testdata/README.md describes the format. Run with -update to rewrite the client's "<"
// lines from what the bridge actually sent (review the diff before committing it).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store/sqlite"
)

var update = flag.Bool("update", false, "rewrite the client \"<\" lines of testdata/*/*.txtar from what the bridge sent")

// goldenWait bounds every wait of the runner: for a client message, for the upstream script
// to be used up, for open requests to be answered. Generous, for -race on a busy machine.
const goldenWait = 15 * time.Second

func TestGolden(t *testing.T) {
	files, err := filepath.Glob("../testdata/forward/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts in ../testdata/forward (%v)", err)
	}
	for _, path := range files {
		t.Run("forward/"+strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
			t.Parallel()
			runGolden(t, path)
		})
	}
}

// ---- the transcript file -------------------------------------------------------------

type transcript struct {
	path   string
	lines  []string // the file, kept for -update
	header string
	bridge string // the -- bridge -- section: JSON overrides of the bridge config
	up     []upStep
	client []clientLine
}

// upStep is one ">>" request pattern (subset match) and the "<<" reply to it.
type upStep struct {
	line   int
	expect any
	reply  string // JSON text, sent in the order written
}

// clientLine is a ">" message (or "> GET") the client sends, or a "<" message it must receive.
type clientLine struct {
	line    int // 0-based index into transcript.lines
	send    bool
	get     bool
	msg     any
	raw     string // msg as written, sent in that order
	comment string // a trailing "# …", kept by -update
}

// parseTranscript reads a txtar-like file: "-- name --" starts a section, text before the
// first one is the header; blank lines and "#" lines inside sections are comments.
func parseTranscript(path string) (*transcript, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	tr := &transcript{path: path, lines: strings.Split(string(b), "\n")}
	section := ""
	for i, ln := range tr.lines {
		if name, ok := strings.CutPrefix(ln, "-- "); ok && strings.HasSuffix(name, " --") {
			section = strings.TrimSuffix(name, " --")
			continue
		}
		s := strings.TrimSpace(ln)
		if section == "" {
			tr.header += ln + "\n"
			continue
		}
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		if err := tr.addLine(section, i, s); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
	}
	if !strings.HasPrefix(strings.TrimSpace(tr.header), "Pins down:") {
		return nil, fmt.Errorf("%s: the header must start with \"Pins down:\"", path)
	}
	for _, st := range tr.up {
		if st.reply == "" {
			return nil, fmt.Errorf("%s:%d: \">>\" without a \"<<\" reply", path, st.line+1)
		}
	}
	return tr, nil
}

func (tr *transcript) addLine(section string, i int, s string) error {
	switch {
	case section == "bridge":
		tr.bridge += s
		return nil
	case section == "upstream" && strings.HasPrefix(s, ">>"):
		v, _, _, err := parseJSONLine(s[2:])
		tr.up = append(tr.up, upStep{line: i, expect: v})
		return err
	case section == "upstream" && strings.HasPrefix(s, "<<"):
		if len(tr.up) == 0 || tr.up[len(tr.up)-1].reply != "" {
			return fmt.Errorf("\"<<\" without a \">>\" before it")
		}
		_, raw, _, err := parseJSONLine(s[2:])
		tr.up[len(tr.up)-1].reply = raw
		return err
	case section == "client" && strings.TrimSpace(s[1:]) == "GET" && s[0] == '>':
		tr.client = append(tr.client, clientLine{line: i, send: true, get: true})
		return nil
	case section == "client" && (s[0] == '>' || s[0] == '<'):
		v, raw, comment, err := parseJSONLine(s[1:])
		tr.client = append(tr.client, clientLine{line: i, send: s[0] == '>', msg: v, raw: raw, comment: comment})
		return err
	}
	return fmt.Errorf("unexpected line in section %q: %s", section, s)
}

// parseJSONLine decodes one JSON value (also returned as text), allowing a trailing
// "# comment".
func parseJSONLine(rest string) (v any, raw, comment string, err error) {
	rest = strings.TrimSpace(rest)
	dec := json.NewDecoder(strings.NewReader(rest))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, "", "", fmt.Errorf("bad JSON: %w", err)
	}
	raw = rest[:dec.InputOffset()]
	comment = strings.TrimSpace(rest[dec.InputOffset():])
	if comment != "" && !strings.HasPrefix(comment, "#") {
		return nil, "", "", fmt.Errorf("text after the JSON value: %q", comment)
	}
	return v, raw, comment, nil
}

// startsWithInitialize reports whether the client section opens the session itself.
func (tr *transcript) startsWithInitialize() bool {
	if len(tr.client) == 0 || !tr.client[0].send {
		return false
	}
	m, _ := tr.client[0].msg.(map[string]any)
	return m["method"] == "initialize"
}

// ---- variables and JSON matching -----------------------------------------------------

var varName = regexp.MustCompile(`^\$[A-Z][A-Z0-9_]*$`)

const (
	anyValue    = "$ANY"    // matches every value
	absentValue = "$ABSENT" // as an object member: the key must not be there
)

func isVar(s string) bool { return varName.MatchString(s) && s != anyValue && s != absentValue }

// vars holds the "$NAME" bindings shared by the client and upstream sides.
type vars struct {
	mu sync.Mutex
	m  map[string]any
}

// match compares got with the pattern want and returns the differences. Variables bind
// only when everything matched, unless lenient (-update), which keeps what it could bind.
// subset allows members of got that want does not mention (upstream ">>" lines).
func (v *vars) match(want, got any, subset, lenient bool) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	m := &matcher{bound: v.m, tent: map[string]any{}, subset: subset}
	m.walk("$", want, got)
	if len(m.diffs) == 0 || lenient {
		for k, x := range m.tent {
			v.m[k] = x
		}
	}
	return m.diffs
}

type matcher struct {
	bound, tent map[string]any
	subset      bool
	diffs       []string
}

func (m *matcher) walk(path string, want, got any) {
	switch w := want.(type) {
	case string:
		if w == anyValue {
			return
		}
		if isVar(w) {
			if b, ok := m.bound[w]; ok {
				m.check(path, b, got, " (the value of "+w+")")
			} else if b, ok := m.tent[w]; ok {
				m.check(path, b, got, " (the value of "+w+")")
			} else {
				m.tent[w] = got
			}
			return
		}
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			m.diffs = append(m.diffs, fmt.Sprintf("%s: want an object, got %s", path, compact(got)))
			return
		}
		for _, k := range sortedKeys(w) {
			gv, has := g[k]
			switch {
			case w[k] == absentValue && has:
				m.diffs = append(m.diffs, fmt.Sprintf("%s.%s: want no such member, got %s", path, k, compact(gv)))
			case w[k] == absentValue:
			case !has:
				m.diffs = append(m.diffs, fmt.Sprintf("%s.%s: missing (want %s)", path, k, compact(w[k])))
			default:
				m.walk(path+"."+k, w[k], gv)
			}
		}
		if !m.subset {
			for _, k := range sortedKeys(g) {
				if _, ok := w[k]; !ok {
					m.diffs = append(m.diffs, fmt.Sprintf("%s.%s: unexpected member %s", path, k, compact(g[k])))
				}
			}
		}
		return
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			m.diffs = append(m.diffs, fmt.Sprintf("%s: want %s, got %s", path, compact(want), compact(got)))
			return
		}
		for i := range w {
			m.walk(path+"["+strconv.Itoa(i)+"]", w[i], g[i])
		}
		return
	}
	m.check(path, want, got, "")
}

func (m *matcher) check(path string, want, got any, note string) {
	if !equalJSON(want, got) {
		m.diffs = append(m.diffs, fmt.Sprintf("%s: want %s%s, got %s", path, compact(want), note, compact(got)))
	}
}

// equalJSON compares decoded JSON values semantically (numbers by value).
func equalJSON(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		fx, ex := x.Float64()
		fy, ey := y.Float64()
		return x == y || (ex == nil && ey == nil && fx == fy)
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k := range x {
			if yv, ok := y[k]; !ok || !equalJSON(x[k], yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// subst returns the JSON text raw with every bound "$NAME" string replaced by its value;
// members keep the order they were written in.
func (v *vars) subst(raw string) (string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var walk func(r gjson.Result) (string, error)
	walk = func(r gjson.Result) (string, error) {
		var parts []string
		var err error
		each := func(k, e gjson.Result) bool {
			var s string
			if s, err = walk(e); err == nil && r.IsObject() {
				s = k.Raw + ":" + s
			}
			parts = append(parts, s)
			return err == nil
		}
		switch {
		case r.Type == gjson.String && (r.Str == anyValue || r.Str == absentValue):
			return "", fmt.Errorf("%s cannot be sent", r.Str)
		case r.Type == gjson.String && isVar(r.Str):
			b, ok := v.m[r.Str]
			if !ok {
				return "", fmt.Errorf("variable %s is not bound yet", r.Str)
			}
			return compact(b), nil
		case r.IsObject():
			r.ForEach(each)
			return "{" + strings.Join(parts, ",") + "}", err
		case r.IsArray():
			r.ForEach(each)
			return "[" + strings.Join(parts, ",") + "]", err
		}
		return r.Raw, nil
	}
	return walk(gjson.Parse(raw))
}

// rewrite renders a received message for -update, in the order it arrived: bound values
// become their "$NAME" again, createdAt/lastUpdatedAt and places want left as "$ANY" become
// "$ANY".
func (v *vars) rewrite(want any, got gjson.Result, key string) string {
	if key == "createdAt" || key == "lastUpdatedAt" || want == anyValue {
		return strconv.Quote(anyValue)
	}
	v.mu.Lock()
	if s, ok := want.(string); ok && isVar(s) && equalJSON(v.m[s], decodeJSON(got.Raw)) {
		v.mu.Unlock()
		return strconv.Quote(s)
	}
	if got.Type == gjson.String {
		for _, name := range sortedKeys(v.m) {
			if v.m[name] == got.Str {
				v.mu.Unlock()
				return strconv.Quote(name)
			}
		}
	}
	v.mu.Unlock()
	var parts []string
	switch {
	case got.IsObject():
		wm, _ := want.(map[string]any)
		got.ForEach(func(k, e gjson.Result) bool {
			parts = append(parts, strconv.Quote(k.Str)+":"+v.rewrite(wm[k.Str], e, k.Str))
			return true
		})
		return "{" + strings.Join(parts, ",") + "}"
	case got.IsArray():
		wa, _ := want.([]any)
		for i, e := range got.Array() {
			var w any
			if i < len(wa) {
				w = wa[i]
			}
			parts = append(parts, v.rewrite(w, e, ""))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	var buf bytes.Buffer
	_ = json.Compact(&buf, []byte(got.Raw))
	return buf.String()
}

func decodeJSON(s string) any {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	return v
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ---- the scripted upstream -----------------------------------------------------------

// goldenUpstream is a 2026-07-28 Streamable HTTP endpoint that follows the transcript's
// upstream script. mu guards next, last and errs.
type goldenUpstream struct {
	tr       *transcript
	vars     *vars
	scripted map[string]bool // methods the script has steps for
	done     chan struct{}

	mu   sync.Mutex
	next int
	last map[string]string // "method taskId" → the reply last given (repeated for polls)
	errs []string
}

const defaultDiscover = `{"resultType":"complete","supportedVersions":["2026-07-28"],` +
	`"capabilities":{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}},` +
	`"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"golden-upstream","version":"1.0.0"}},` +
	`"ttlMs":3600000,"cacheScope":"public"}`

// errUnexpected is the upstream's answer to a request its script does not allow.
const errUnexpected = `{"jsonrpc":"2.0","error":{"code":-32603,"message":"golden upstream: unexpected request"}}`

func newGoldenUpstream(tr *transcript, v *vars) *goldenUpstream {
	u := &goldenUpstream{tr: tr, vars: v, done: make(chan struct{}), last: map[string]string{}, scripted: map[string]bool{}}
	for _, st := range tr.up {
		if m, _ := st.expect.(map[string]any); m != nil {
			u.scripted[fmt.Sprint(m["method"])] = true
		}
	}
	if len(tr.up) == 0 {
		close(u.done)
	}
	return u
}

func (u *goldenUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	msg, _ := decodeJSON(string(body)).(map[string]any)
	method, _ := msg["method"].(string)
	if msg == nil || method == "" {
		u.fail("upstream got a POST that is not a JSON-RPC request: %s", body)
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	u.checkHeaders(r, method, msg)
	id, isRequest := msg["id"]
	if !isRequest {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if method == sep2663.MethodSubscriptionsListen && !u.scripted[method] {
		// No push from this upstream (a listen stream cannot be scripted yet): the
		// 2026-07-28 answer to an unimplemented method, so the bridge polls.
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+compact(id)+`,"error":{"code":-32601,"message":"Method not found"}}`)
		return
	}
	reply := u.answer(method, msg)
	out := `{"jsonrpc":"2.0","id":` + compact(id) + `,"result":` + reply + `}`
	if m, ok := decodeJSON(reply).(map[string]any); ok && m["jsonrpc"] != nil { // a whole message (an error)
		m["id"] = id
		out = compact(m)
	}
	_, _ = io.WriteString(w, out)
}

// checkHeaders enforces the 2026-07-28 HTTP rules the bridge must follow on every POST.
func (u *goldenUpstream) checkHeaders(r *http.Request, method string, msg map[string]any) {
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

// answer consumes the current step when the request matches it; a tasks/get that does not
// is a timing-dependent poll and gets the reply last given for that task; anything else is
// a failure.
func (u *goldenUpstream) answer(method string, msg map[string]any) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if method == sep2663.MethodDiscover && !u.scripted[method] {
		return defaultDiscover
	}
	params, _ := msg["params"].(map[string]any)
	key := method + " " + fmt.Sprint(params["taskId"])
	var diffs []string
	if u.next < len(u.tr.up) {
		st := u.tr.up[u.next]
		if diffs = u.vars.match(st.expect, msg, true, false); len(diffs) == 0 {
			reply, err := u.vars.subst(st.reply)
			if err != nil {
				u.errs = append(u.errs, fmt.Sprintf("%s:%d: reply: %v", u.tr.path, st.line+1, err))
				reply = errUnexpected
			}
			u.last[key] = reply
			if u.next++; u.next == len(u.tr.up) {
				close(u.done)
			}
			return reply
		}
	}
	if r, ok := u.last[key]; ok && method == "tasks/get" {
		return r
	}
	where := "after the last step"
	if u.next < len(u.tr.up) {
		where = fmt.Sprintf("at step line %d: %s", u.tr.up[u.next].line+1, strings.Join(diffs, "; "))
	}
	u.errs = append(u.errs, fmt.Sprintf("unexpected upstream request %s\n\t%s", compact(msg), where))
	return errUnexpected
}

func (u *goldenUpstream) fail(format string, args ...any) {
	u.mu.Lock()
	u.errs = append(u.errs, fmt.Sprintf(format, args...))
	u.mu.Unlock()
}

func (u *goldenUpstream) report(t *testing.T) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, e := range u.errs {
		t.Error(e)
	}
}

// ---- the legacy client ---------------------------------------------------------------

// goldenClient speaks 2025-11-25 Streamable HTTP and collects every message it receives,
// per stream (a POST's reply, its SSE events, the GET stream). mu guards the fields below it.
type goldenClient struct {
	url    string
	vars   *vars
	ctx    context.Context
	cancel context.CancelFunc
	posts  sync.WaitGroup // requests in flight
	all    sync.WaitGroup // every reader goroutine

	mu      sync.Mutex
	session string
	version string
	streams int            // streams opened so far (their ids)
	pending []received     // messages not matched yet, in arrival order
	open    map[int]string // stream → the request it still waits on
	arrived chan struct{}  // signalled on every new message
}

type received struct {
	stream int
	raw    string
	v      any
}

func newGoldenClient(url string, v *vars) *goldenClient {
	ctx, cancel := context.WithCancel(context.Background())
	return &goldenClient{url: url, vars: v, ctx: ctx, cancel: cancel, version: "2025-11-25",
		open: map[int]string{}, arrived: make(chan struct{}, 1)}
}

func (c *goldenClient) close() {
	c.cancel()
	c.all.Wait()
}

func (c *goldenClient) do(method string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(c.ctx, method, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	} else {
		req.Header.Set("Accept", "text/event-stream")
	}
	c.mu.Lock()
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("MCP-Protocol-Version", c.version)
	}
	c.mu.Unlock()
	return http.DefaultClient.Do(req)
}

// initialize opens the session the way most clients do, for transcripts that do not.
func (c *goldenClient) initialize() error {
	resp, err := c.do(http.MethodPost, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",`+
		`"capabilities":{"elicitation":{"form":{}}},"clientInfo":{"name":"golden-client","version":"1.0.0"}}}`))
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" || !gjson.GetBytes(body, "result").Exists() {
		return fmt.Errorf("initialize: HTTP %d %s", resp.StatusCode, body)
	}
	c.mu.Lock()
	c.session = resp.Header.Get("Mcp-Session-Id")
	c.mu.Unlock()
	return c.post([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
}

// post sends a notification or a response; the bridge must accept it with 202.
func (c *goldenClient) post(body []byte) error {
	resp, err := c.do(http.MethodPost, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("HTTP %d (want 202): %s", resp.StatusCode, b)
	}
	return nil
}

// request POSTs a request in the background; its reply (JSON or SSE) becomes a stream.
func (c *goldenClient) request(body []byte, init bool) {
	c.mu.Lock()
	c.streams++
	sid := c.streams
	c.open[sid] = string(body)
	c.mu.Unlock()
	c.posts.Add(1)
	c.all.Add(1)
	go func() {
		defer c.all.Done()
		defer c.posts.Done()
		defer func() { c.mu.Lock(); delete(c.open, sid); c.mu.Unlock() }()
		resp, err := c.do(http.MethodPost, body)
		if err != nil {
			c.push(sid, compact(map[string]any{"transportError": err.Error()}))
			return
		}
		defer resp.Body.Close()
		if init {
			c.mu.Lock()
			c.session = resp.Header.Get("Mcp-Session-Id")
			c.mu.Unlock()
		}
		c.readReply(sid, resp)
	}()
}

// openGet opens the session's standalone SSE stream and returns once the bridge holds it.
func (c *goldenClient) openGet() error {
	resp, err := c.do(http.MethodGet, nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return fmt.Errorf("GET: HTTP %d: %s", resp.StatusCode, b)
	}
	c.mu.Lock()
	c.streams++
	sid := c.streams
	c.mu.Unlock()
	c.all.Add(1)
	go func() {
		defer c.all.Done()
		defer resp.Body.Close()
		c.readSSE(sid, resp.Body)
	}()
	return nil
}

func (c *goldenClient) readReply(sid int, resp *http.Response) {
	switch ct := resp.Header.Get("Content-Type"); {
	case resp.StatusCode == http.StatusOK && strings.HasPrefix(ct, "text/event-stream"):
		c.readSSE(sid, resp.Body)
	default:
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !json.Valid(b) {
			b = []byte(compact(map[string]any{"httpStatus": resp.StatusCode, "body": string(b)}))
		}
		c.push(sid, string(b))
	}
}

// readSSE collects the "data:" of each event; comments (keep-alives) are not messages.
func (c *goldenClient) readSSE(sid int, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	var data []string
	for sc.Scan() {
		ln := sc.Text()
		switch {
		case ln == "" && len(data) > 0:
			// An event with empty data is the priming event of a resumable stream
			// (an event id only): not a message.
			if msg := strings.Join(data, "\n"); strings.TrimSpace(msg) != "" {
				c.push(sid, msg)
			}
			data = nil
		case strings.HasPrefix(ln, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(ln, "data:"), " "))
		}
	}
}

func (c *goldenClient) push(sid int, raw string) {
	c.mu.Lock()
	c.pending = append(c.pending, received{stream: sid, raw: raw, v: decodeJSON(raw)})
	c.mu.Unlock()
	select {
	case c.arrived <- struct{}{}:
	default:
	}
}

// expect takes the message matching want among the oldest unread message of each stream
// (order holds within a stream; across streams it is a race the transcript must not
// depend on). In -update mode a non-matching message is taken after a short grace.
func (c *goldenClient) expect(want any) (got *received, diffs []string) {
	deadline := time.After(goldenWait)
	var grace <-chan time.Time
	for {
		c.mu.Lock()
		seen := map[int]bool{}
		diffs = nil
		for i, r := range c.pending {
			if seen[r.stream] {
				continue
			}
			seen[r.stream] = true
			d := c.vars.match(want, r.v, false, false)
			if len(d) == 0 {
				c.pending = slices.Delete(c.pending, i, i+1)
				c.mu.Unlock()
				return &r, nil
			}
			diffs = append(diffs, fmt.Sprintf("against %s:\n\t\t%s", r.raw, strings.Join(d, "\n\t\t")))
		}
		if *update && len(c.pending) > 0 && grace == nil {
			grace = time.After(500 * time.Millisecond)
		}
		c.mu.Unlock()
		select {
		case <-c.arrived:
		case <-grace:
			c.mu.Lock()
			r := c.pending[0]
			c.pending = c.pending[1:]
			c.mu.Unlock()
			return &r, append(c.vars.match(want, r.v, false, true), "(taken for -update)")
		case <-deadline:
			if diffs == nil {
				diffs = []string{"nothing received within " + goldenWait.String()}
			}
			return nil, diffs
		}
	}
}

// ---- running a transcript ------------------------------------------------------------

// bridgeSection is what a "-- bridge --" section may set.
type bridgeSection struct {
	ListPageSize   int   `json:"listPageSize"`
	PollFloorMs    int64 `json:"pollFloorMs"`
	HeartbeatMs    int64 `json:"heartbeatMs"`
	InputTimeoutMs int64 `json:"inputTimeoutMs"`
}

func runGolden(t *testing.T, path string) {
	tr, err := parseTranscript(path)
	if err != nil {
		t.Fatal(err)
	}
	v := &vars{m: map[string]any{}}
	up := newGoldenUpstream(tr, v)
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)

	cfg := forward.Config{Logger: zerolog.Nop(), PollFloorMs: 50, Heartbeat: time.Minute}
	if tr.bridge != "" {
		var bs bridgeSection
		dec := json.NewDecoder(strings.NewReader(tr.bridge))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&bs); err != nil {
			t.Fatalf("%s: -- bridge -- section: %v", path, err)
		}
		cfg.ListPageSize = bs.ListPageSize
		if bs.PollFloorMs > 0 {
			cfg.PollFloorMs = bs.PollFloorMs
		}
		cfg.InputTimeout = time.Duration(bs.InputTimeoutMs) * time.Millisecond
		if bs.HeartbeatMs > 0 {
			cfg.Heartbeat = time.Duration(bs.HeartbeatMs) * time.Millisecond
		}
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "golden.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg.Store = st
	cfg.Upstream = sep2663.NewClient(sep2663.ClientOptions{URL: upSrv.URL + "/mcp"})
	b, err := bridge.NewForward(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	mux := http.NewServeMux()
	mux.Handle("/mcp", mustDoor(t, bridge.DoorConfig{}, b))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := newGoldenClient(srv.URL+"/mcp", v)
	t.Cleanup(c.close)

	if !tr.startsWithInitialize() {
		if err := c.initialize(); err != nil {
			t.Fatal(err)
		}
	}
	rewritten := map[int]string{}
	ok := playClient(t, tr, c, rewritten)
	if ok {
		finish(t, tr, c, up)
	}
	up.report(t)
	if *update && len(rewritten) > 0 {
		for i, s := range rewritten {
			tr.lines[i] = s
		}
		if err := os.WriteFile(path, []byte(strings.Join(tr.lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// playClient runs the client section; false when it had to stop at a failed line.
func playClient(t *testing.T, tr *transcript, c *goldenClient, rewritten map[int]string) bool {
	for _, ln := range tr.client {
		where := fmt.Sprintf("%s:%d", tr.path, ln.line+1)
		if !ln.send {
			got, diffs := c.expect(ln.msg)
			if got != nil && diffs != nil && *update {
				s := "< " + c.vars.rewrite(ln.msg, gjson.Parse(got.raw), "")
				if ln.comment != "" {
					s += " " + ln.comment
				}
				if s != strings.TrimSpace(tr.lines[ln.line]) {
					rewritten[ln.line] = s
				}
				continue
			}
			if diffs != nil {
				t.Errorf("%s: the client did not receive the expected message\n\t%s", where, strings.Join(diffs, "\n\t"))
				return false
			}
			continue
		}
		if ln.get {
			if err := c.openGet(); err != nil {
				t.Errorf("%s: %v", where, err)
				return false
			}
			continue
		}
		body, err := c.vars.subst(ln.raw)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			return false
		}
		m, _ := ln.msg.(map[string]any)
		_, hasID := m["id"]
		if m["method"] != nil && hasID {
			if m["method"] == "initialize" {
				c.mu.Lock()
				c.version = gjson.Get(body, "params.protocolVersion").Str
				c.mu.Unlock()
			}
			c.request([]byte(body), m["method"] == "initialize")
			continue
		}
		if err := c.post([]byte(body)); err != nil {
			t.Errorf("%s: %v", where, err)
			return false
		}
	}
	return true
}

// finish checks what a transcript implies beyond its lines: the upstream script was used
// up, every request was answered, and the client got nothing it did not expect.
func finish(t *testing.T, tr *transcript, c *goldenClient, up *goldenUpstream) {
	select {
	case <-up.done:
	case <-time.After(goldenWait):
		up.mu.Lock()
		t.Errorf("%s:%d: the bridge never sent the upstream request of this step", tr.path, tr.up[up.next].line+1)
		up.mu.Unlock()
	}
	answered := make(chan struct{})
	go func() { c.posts.Wait(); close(answered) }()
	select {
	case <-answered:
	case <-time.After(goldenWait):
		c.mu.Lock()
		for _, body := range c.open {
			t.Errorf("%s: request never answered: %s", tr.path, body)
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.pending {
		t.Errorf("%s: the client received a message the transcript does not expect: %s", tr.path, r.raw)
	}
}
