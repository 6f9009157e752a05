package sep2663

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/hop"
	"github.com/taskbridge/taskbridge/internal/jsonobj"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/redact"
	"github.com/taskbridge/taskbridge/internal/trace"
	"github.com/taskbridge/taskbridge/internal/upstream"
)

// ClientOptions configure a Client.
type ClientOptions struct {
	URL        string         // the upstream MCP endpoint, e.g. http://127.0.0.1:9000/mcp
	HTTPClient *http.Client   // nil: a shared client whose pool keeps 256 idle connections per host
	ClientInfo Implementation // default {Name:"taskbridge", Version:"dev"}
	Header     http.Header    // extra headers (upstream credentials from config), added to every POST
	// Transport, when set, carries every message instead of HTTP (URL, HTTPClient and
	// Header are then unused; URL defaults to Transport.Name() in errors). See stdio.go.
	Transport Transport
	// OnError, when set, is told of every failed Call (method and error) before it
	// returns: the era router watches for answers that no longer match the upstream's
	// recorded faces. It must not block.
	OnError func(method string, err error)
}

// Transport carries framed JSON-RPC messages to an upstream reached by other means than
// Streamable HTTP, such as a child process over stdio (StdioTransport). The Client still
// builds the envelope and the frame; a Transport only moves bytes and matches replies.
// Implementations are safe for concurrent use.
type Transport interface {
	// RoundTrip sends body, a framed request whose id is id, and waits for its reply: the
	// result, or the JSON-RPC error the upstream answered (rpcErr). Notifications that
	// belong to the request (a subscriptions/listen stream's, by subscriptionId) go to
	// onMessage (may be nil), in order. When ctx ends first the transport tells the
	// upstream (notifications/cancelled) and returns ctx.Err(). Other failures are plain
	// errors; the Client wraps them in *upstream.Error.
	RoundTrip(ctx context.Context, id jsonrpc.ID, body []byte, onMessage func(*jsonrpc.Message)) (result json.RawMessage, rpcErr *jsonrpc.Error, err error)
	// Send writes a framed notification.
	Send(ctx context.Context, body []byte) error
	// Name names the upstream in errors, in place of a URL (e.g. "stdio:tbfixture").
	Name() string
}

// Client is a stateless 2026-07-28 Streamable HTTP client for one upstream endpoint.
//
// Concurrency: safe for concurrent use. All fields are set by NewClient and never written
// again, except nextID, which is atomic.
type Client struct {
	url    string // where requests go, credentials and all
	shown  string // url redacted (internal/redact): the only form that leaves this type
	http   *http.Client
	info   Implementation
	header http.Header
	tr     Transport // nil: Streamable HTTP
	onErr  func(method string, err error)
	nextID atomic.Int64
}

// defaultHTTPClient is shared by every Client built without an HTTPClient. Its transport is
// internal/hop (no goroutine hand-offs per exchange; docs/benchmarks.md), with a pool sized
// for concurrency: Go's default of 2 idle connections per host causes connection churn that
// costs about 3x throughput at 32 concurrent callers (design §10).
var defaultHTTPClient = sync.OnceValue(func() *http.Client {
	return &http.Client{Transport: hop.NewTransport(hop.Options{})}
})

// NewClient returns a client for o.URL.
func NewClient(o ClientOptions) *Client {
	c := &Client{url: o.URL, http: o.HTTPClient, info: o.ClientInfo, header: o.Header.Clone(), tr: o.Transport, onErr: o.OnError}
	if c.tr != nil && c.url == "" {
		c.url = c.tr.Name()
	}
	c.shown = redact.URL(c.url)
	if c.http == nil {
		c.http = defaultHTTPClient()
	}
	if c.info.Name == "" {
		c.info = Implementation{Name: "taskbridge", Version: "dev"}
	}
	return c
}

// URL returns the upstream endpoint in its redacted form (no userinfo, no query): what
// logs, records and errors may show.
func (c *Client) URL() string { return c.shown }

// RequestMeta is the per-request 2026-07-28 envelope the client injects into params._meta.
type RequestMeta struct {
	// ClientCapabilities is the full ClientCapabilities object. nil means: keep the one
	// already in params._meta, else {}.
	ClientCapabilities json.RawMessage
	// ClientInfo nil means: keep the one already in params._meta, else the client's default.
	ClientInfo *Implementation
	// LogLevel, when set, is _meta["io.modelcontextprotocol/logLevel"]: the server may send
	// notifications/message of that level and above on the request's stream (2026-07-28
	// replaced logging/setLevel by this per-request field). "" keeps what params has.
	LogLevel string
	// Header are extra HTTP headers of this request only (the Mcp-Param-* headers of a
	// tools/call: ParamHeaderValues, or the ones a 2026-07-28 client sent). They are added
	// after ClientOptions.Header; the protocol headers (MCP-Protocol-Version, Mcp-Method,
	// Mcp-Name, Content-Type, Accept) are set last and always win. Unused over a Transport:
	// other transports carry no headers (the spec lets them ignore x-mcp-header).
	Header http.Header
}

func (c *Client) upstreamErr(method string, status int, err error) *upstream.Error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // the URL is named by upstream.Error itself
	}
	return &upstream.Error{URL: c.shown, Method: method, Status: status, Err: err}
}

// Call sends one request and returns its raw result. See the package documentation for
// the envelope and headers it adds. A JSON-RPC error reply is returned as *jsonrpc.Error,
// unchanged; every other failure as *upstream.Error. Notifications on an SSE reply stream go
// to onMessage (may be nil), in order, on the calling goroutine.
func (c *Client) Call(ctx context.Context, method string, params json.RawMessage, meta RequestMeta,
	onMessage func(*jsonrpc.Message)) (_ json.RawMessage, err error) {
	ctx, end := trace.StartUpstream(ctx, trace.Modern, method)
	defer func() { end(err) }()
	res, err := c.call(ctx, method, params, meta, onMessage)
	if err != nil && c.onErr != nil {
		c.onErr(method, err)
	}
	return res, err
}

func (c *Client) call(ctx context.Context, method string, params json.RawMessage, meta RequestMeta,
	onMessage func(*jsonrpc.Message)) (json.RawMessage, error) {
	params, err := c.withEnvelope(params, meta)
	if err != nil {
		return nil, fmt.Errorf("sep2663: %s: %w", method, err)
	}
	params = trace.InjectMeta(ctx, params) // SEP-414: _meta.traceparent, on stdio too
	id := jsonrpc.IntID(c.nextID.Add(1))
	if c.tr != nil {
		return c.roundTrip(ctx, method, id, params, onMessage)
	}
	resp, err := c.post(ctx, method, params, frame(id.Raw(), method, params), meta.Header)
	if err != nil {
		return nil, err
	}
	defer closeBody(resp.Body)
	res, rpcErr, err := readResponse(resp.Header.Get("Content-Type"), resp.StatusCode, resp.Body, id, onMessage)
	switch {
	case rpcErr != nil:
		return nil, rpcErr
	case err != nil:
		return nil, c.upstreamErr(method, resp.StatusCode, err)
	}
	return res, nil
}

// Notify POSTs a notification (the server answers 202 Accepted).
func (c *Client) Notify(ctx context.Context, method string, params json.RawMessage, meta RequestMeta) error {
	params, err := c.withEnvelope(params, meta)
	if err != nil {
		return fmt.Errorf("sep2663: %s: %w", method, err)
	}
	if c.tr != nil {
		if err := c.tr.Send(ctx, frame("", method, params)); err != nil {
			return c.upstreamErr(method, 0, err)
		}
		return nil
	}
	resp, err := c.post(ctx, method, params, frame("", method, params), meta.Header)
	if err != nil {
		return err
	}
	defer closeBody(resp.Body)
	if resp.StatusCode/100 == 2 {
		return nil
	}
	b, err := readCapped(resp.Body, int64(maxBody))
	if err == nil {
		if m, derr := jsonrpc.Decode(b); derr == nil && m.Error != nil {
			return m.Error
		}
		err = errors.New("no JSON-RPC body")
	}
	return c.upstreamErr(method, resp.StatusCode, err)
}

// roundTrip is Call over a Transport.
func (c *Client) roundTrip(ctx context.Context, method string, id jsonrpc.ID, params json.RawMessage,
	onMessage func(*jsonrpc.Message)) (json.RawMessage, error) {
	res, rpcErr, err := c.tr.RoundTrip(ctx, id, frame(id.Raw(), method, params), onMessage)
	switch {
	case rpcErr != nil:
		return nil, rpcErr
	case err != nil:
		return nil, c.upstreamErr(method, 0, err)
	}
	return res, nil
}

// post sends one framed message with the client's headers, the request's own (extra) and
// the protocol headers, in that order.
func (c *Client) post(ctx context.Context, method string, params, body []byte, extra http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, c.upstreamErr(method, 0, err)
	}
	for k, vs := range c.header {
		req.Header[k] = append([]string(nil), vs...)
	}
	for k, vs := range extra {
		req.Header[k] = append([]string(nil), vs...)
	}
	setProtocolHeaders(req.Header, method, params)
	trace.InjectHeaders(ctx, req.Header)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.upstreamErr(method, 0, err)
	}
	return resp, nil
}

// closeBody drains a little of what is left, so the connection can be reused, and closes.
func closeBody(b io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(b, 64<<10))
	_ = b.Close()
}

// frame builds the JSON-RPC message by hand, so params go out byte for byte (json.Marshal
// would compact them and escape HTML characters). rawID "" makes a notification.
func frame(rawID, method string, params []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(params) + len(method) + 64)
	b.WriteString(`{"jsonrpc":"2.0",`)
	if rawID != "" {
		b.WriteString(`"id":`)
		b.WriteString(rawID)
		b.WriteByte(',')
	}
	b.WriteString(`"method":`)
	b.Write(quote(method))
	b.WriteString(`,"params":`)
	b.Write(params)
	b.WriteByte('}')
	return b.Bytes()
}

// quote encodes s as a JSON string without HTML escaping.
func quote(s string) []byte { return jsonobj.Quote(s) }

// withEnvelope returns params with the 2026-07-28 keys merged into params._meta. Only the
// top level of params and of _meta is decoded; every other value is kept byte for byte.
// The protocol version is always set (it must equal the header); capabilities and client
// info are set from meta, else kept when already present, else defaulted.
func (c *Client) withEnvelope(params json.RawMessage, meta RequestMeta) (json.RawMessage, error) {
	if out, ok := c.spliceEnvelope(params, meta); ok {
		return out, nil
	}
	top, err := decodeObject(params, "params")
	if err != nil {
		return nil, err
	}
	m, err := decodeObject(topGet(top, "_meta"), "params._meta")
	if err != nil {
		return nil, err
	}
	m = m.Set(MetaProtocolVersion, quote(ProtocolVersion))
	switch {
	case meta.ClientCapabilities != nil:
		if !json.Valid(meta.ClientCapabilities) || !gjson.ParseBytes(meta.ClientCapabilities).IsObject() {
			return nil, errors.New("ClientCapabilities is not a JSON object")
		}
		m = m.Set(MetaClientCapabilities, meta.ClientCapabilities)
	default:
		m = m.SetDefault(MetaClientCapabilities, json.RawMessage("{}"))
	}
	switch {
	case meta.ClientInfo != nil:
		m = m.Set(MetaClientInfo, marshal(meta.ClientInfo))
	default:
		m = m.SetDefault(MetaClientInfo, marshal(c.info))
	}
	if meta.LogLevel != "" {
		m = m.Set(MetaLogLevel, quote(meta.LogLevel))
	}
	return top.Set("_meta", m.Encode()).Encode(), nil
}

// decodeObject splits the top level of a JSON object (internal/jsonobj: members keep their
// order and bytes); empty input and null give an empty object.
func decodeObject(raw json.RawMessage, what string) (jsonobj.Object, error) {
	t := bytes.TrimSpace(raw)
	if len(t) > 0 && string(t) != "null" && t[0] != '{' {
		return nil, fmt.Errorf("%s must be a JSON object", what)
	}
	o, err := jsonobj.ParseOrEmpty(t)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return o, nil
}

// topGet returns the member key of o (nil when absent).
func topGet(o jsonobj.Object, key string) json.RawMessage { v, _ := o.Get(key); return v }

// marshal encodes a value this package owns (never fails for its types).
func marshal(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("sep2663: marshal: " + err.Error())
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// withTasksExtension returns caps (a ClientCapabilities object; nil means {}) with
// extensions[ExtensionTasks] declared. Caps that already declare it come back unchanged.
func withTasksExtension(caps json.RawMessage) (json.RawMessage, error) {
	if gjson.GetBytes(caps, "extensions."+escapedTasksExtension).IsObject() {
		return caps, nil // already declared (the bridge always declares it): no re-encoding
	}
	top, err := decodeObject(caps, "ClientCapabilities")
	if err != nil {
		return nil, err
	}
	ext, err := decodeObject(topGet(top, "extensions"), "ClientCapabilities.extensions")
	if err != nil {
		return nil, err
	}
	if ext.Has(ExtensionTasks) {
		return caps, nil
	}
	return top.Set("extensions", ext.Set(ExtensionTasks, json.RawMessage("{}")).Encode()).Encode(), nil
}

// tasksMeta is meta with the tasks extension declared, as every task-aware call needs: the
// server may only create a task (or serve tasks/*) for a request that declared it.
func tasksMeta(meta RequestMeta) (RequestMeta, error) {
	caps, err := withTasksExtension(meta.ClientCapabilities)
	if err != nil {
		return meta, err
	}
	meta.ClientCapabilities = caps
	return meta, nil
}

// invalid builds the upstream.Error for a reply that breaks the protocol.
func (c *Client) invalid(method, format string, args ...any) error {
	return c.upstreamErr(method, 0, fmt.Errorf("%w: "+format, append([]any{ErrInvalidReply}, args...)...))
}

// resultType reads result.resultType; a result without one is "complete". ok is false when
// the result is not a JSON object or resultType is not a string.
func resultType(result json.RawMessage) (string, bool) {
	r := gjson.ParseBytes(result)
	if !r.IsObject() {
		return "", false
	}
	rt := r.Get("resultType")
	switch rt.Type {
	case gjson.Null:
		if rt.Exists() {
			return "", false
		}
		return ResultComplete, true
	case gjson.String:
		return rt.Str, true
	}
	return "", false
}

// Discover calls server/discover. Whether the versions and extensions suit taskbridge is
// for the caller (fallback/) to decide.
func (c *Client) Discover(ctx context.Context) (*DiscoverResult, error) {
	res, err := c.Call(ctx, MethodDiscover, nil, RequestMeta{}, nil)
	if err != nil {
		return nil, err
	}
	if rt, ok := resultType(res); !ok || rt != ResultComplete {
		return nil, c.invalid(MethodDiscover, "resultType %q", gjson.GetBytes(res, "resultType").Raw)
	}
	var d DiscoverResult
	if err := json.Unmarshal(res, &d); err != nil {
		return nil, c.invalid(MethodDiscover, "%v", err)
	}
	if d.ResultType == "" {
		d.ResultType = ResultComplete
	}
	return &d, nil
}

// ResultKind says which of the three tools/call answers arrived.
type ResultKind int

const (
	KindComplete      ResultKind = iota // a CallToolResult
	KindTask                            // a CreateTaskResult: poll tasks/get
	KindInputRequired                   // an InputRequiredResult: retry with inputResponses
)

// String returns the resultType the kind stands for.
func (k ResultKind) String() string {
	switch k {
	case KindComplete:
		return ResultComplete
	case KindTask:
		return ResultTask
	case KindInputRequired:
		return ResultInputRequired
	}
	return "ResultKind(" + strconv.Itoa(int(k)) + ")"
}

// CallToolOutcome is a classified tools/call answer.
type CallToolOutcome struct {
	Kind   ResultKind
	Result json.RawMessage      // the raw result, always set
	Task   *Task                // Kind == KindTask
	Input  *InputRequiredResult // Kind == KindInputRequired
}

// CallTool sends tools/call with the tasks extension declared (added to
// meta.ClientCapabilities if missing) and classifies the answer by resultType: absent or
// "complete", "task" (a flat Task; extra fields such as "content":[] are ignored) or
// "input_required". Any other value, or a task without a taskId, is an invalid reply.
func (c *Client) CallTool(ctx context.Context, params json.RawMessage, meta RequestMeta,
	onMessage func(*jsonrpc.Message)) (*CallToolOutcome, error) {
	meta, err := tasksMeta(meta)
	if err != nil {
		return nil, fmt.Errorf("sep2663: %s: %w", MethodToolsCall, err)
	}
	res, err := c.Call(ctx, MethodToolsCall, params, meta, onMessage)
	if err != nil {
		return nil, err
	}
	rt, ok := resultType(res)
	if !ok {
		return nil, c.invalid(MethodToolsCall, "result is not an object with a string resultType")
	}
	out := &CallToolOutcome{Result: res}
	switch rt {
	case ResultComplete:
		out.Kind = KindComplete
	case ResultTask:
		var t Task
		if err := json.Unmarshal(res, &t); err != nil {
			return nil, c.invalid(MethodToolsCall, "task: %v", err)
		}
		if t.TaskID == "" {
			return nil, c.invalid(MethodToolsCall, "task without taskId")
		}
		out.Kind, out.Task = KindTask, &t
	case ResultInputRequired:
		var in InputRequiredResult
		if err := json.Unmarshal(res, &in); err != nil {
			return nil, c.invalid(MethodToolsCall, "input_required: %v", err)
		}
		if len(in.InputRequests) == 0 && in.RequestState == "" {
			return nil, c.invalid(MethodToolsCall, "input_required without inputRequests or requestState")
		}
		out.Kind, out.Input = KindInputRequired, &in
	default:
		return nil, c.invalid(MethodToolsCall, "unknown resultType %q", rt)
	}
	return out, nil
}

// GetTask calls tasks/get. It is lenient about resultType: "complete" (the schema) and
// "task" (some spec examples) are both read as a DetailedTask. An answer whose taskId is
// not taskID is an invalid reply (ErrInvalidReply), never a task.
func (c *Client) GetTask(ctx context.Context, taskID string, meta RequestMeta) (*DetailedTask, error) {
	res, err := c.taskCall(ctx, MethodTasksGet, GetTaskParams{TaskID: taskID}, meta)
	if err != nil {
		return nil, err
	}
	rt, ok := resultType(res)
	if !ok || (rt != ResultComplete && rt != ResultTask) {
		return nil, c.invalid(MethodTasksGet, "unknown resultType %q", rt)
	}
	var t DetailedTask
	if err := json.Unmarshal(res, &t); err != nil {
		return nil, c.invalid(MethodTasksGet, "%v", err)
	}
	if t.TaskID == "" {
		return nil, c.invalid(MethodTasksGet, "task without taskId")
	}
	if t.TaskID != taskID {
		// An answer about another task (a confused or malicious upstream, a mixed-up
		// proxy) is never adopted into the record that asked.
		return nil, c.upstreamErr(MethodTasksGet, 0, ErrTaskMismatch)
	}
	return &t, nil
}

// UpdateTask sends input responses with tasks/update. The ack is eventually consistent:
// a tasks/get right after may not reflect the input yet.
func (c *Client) UpdateTask(ctx context.Context, taskID string, responses InputResponses, meta RequestMeta) error {
	if responses == nil {
		responses = InputResponses{}
	}
	_, err := c.taskCall(ctx, MethodTasksUpdate, UpdateTaskParams{TaskID: taskID, InputResponses: responses}, meta)
	return err
}

// CancelTask sends tasks/cancel. The ack does not mean the task is cancelled; it may still
// complete or fail.
func (c *Client) CancelTask(ctx context.Context, taskID string, meta RequestMeta) error {
	_, err := c.taskCall(ctx, MethodTasksCancel, CancelTaskParams{TaskID: taskID}, meta)
	return err
}

// taskCall sends a tasks/* request with the extension declared. The result of an ack is
// not inspected beyond being a response.
func (c *Client) taskCall(ctx context.Context, method string, params any, meta RequestMeta) (json.RawMessage, error) {
	meta, err := tasksMeta(meta)
	if err != nil {
		return nil, fmt.Errorf("sep2663: %s: %w", method, err)
	}
	return c.Call(ctx, method, marshal(params), meta, nil)
}

// escapedTasksExtension is ExtensionTasks as a gjson path component.
var escapedTasksExtension = strings.ReplaceAll(ExtensionTasks, ".", `\.`)

// spliceEnvelope is the hot path of withEnvelope: when params is an object without _meta
// and the caller supplies the whole envelope, the _meta member is written in front of the
// existing members, which are not decoded at all. ok is false when the slow path is needed.
func (c *Client) spliceEnvelope(params json.RawMessage, meta RequestMeta) (json.RawMessage, bool) {
	p := bytes.TrimSpace(params)
	if meta.ClientCapabilities == nil || len(p) < 2 || p[0] != '{' || p[len(p)-1] != '}' {
		return nil, false
	}
	if !json.Valid(p) || gjson.GetBytes(p, "_meta").Exists() || !gjson.ParseBytes(meta.ClientCapabilities).IsObject() {
		return nil, false
	}
	info := meta.ClientInfo
	if info == nil {
		info = &c.info
	}
	var b bytes.Buffer
	b.Grow(len(p) + len(meta.ClientCapabilities) + 160)
	b.WriteString(`{"_meta":{"` + MetaClientCapabilities + `":`)
	b.Write(meta.ClientCapabilities)
	b.WriteString(`,"` + MetaClientInfo + `":`)
	b.Write(marshal(info))
	b.WriteString(`,"` + MetaProtocolVersion + `":"` + ProtocolVersion + `"`)
	if meta.LogLevel != "" {
		b.WriteString(`,"` + MetaLogLevel + `":`)
		b.Write(quote(meta.LogLevel))
	}
	b.WriteString(`}`)
	rest := bytes.TrimSpace(p[1:])
	if len(rest) > 1 { // more than the closing brace: keep every member's bytes
		b.WriteByte(',')
	}
	b.Write(rest)
	return b.Bytes(), true
}
