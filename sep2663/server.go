package sep2663

// The 2026-07-28 server face: taskbridge as a modern server toward SEP-2663 clients (the
// reverse route). It owns the transport rules and the envelope validation; what a request
// means is the Handler's business.
//
// Protocol flow (one POST, no session):
//
//	POST /mcp  MCP-Protocol-Version, Mcp-Method, Mcp-Name?   {jsonrpc, id, method, params{_meta…}}
//	  validation, in order (first failure wins):
//	    MCP-Protocol-Version header missing              → 400 -32020
//	    _meta protocolVersion / clientCapabilities missing → 400 -32602
//	    header ≠ _meta protocolVersion                   → 400 -32020
//	    version not 2026-07-28                           → 400 -32022 {supported, requested}
//	    Mcp-Method ≠ method                              → 400 -32020
//	    tasks/result, tasks/list, unknown method         → 404 -32601
//	    Mcp-Name ≠ params.name|uri|taskId                → 400 -32020
//	    tasks/get|update|cancel without the extension    → 400 -32021 {requiredCapabilities}
//	  ← 200 application/json {result with resultType}  or an error with the status above
//	GET, DELETE → 405 (the 2026-07-28 endpoint is POST only)

import (
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/auth"
	"github.com/taskbridge/taskbridge/internal/defaults"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// Request is one validated 2026-07-28 request.
type Request struct {
	ID     jsonrpc.ID
	Method string
	// Params are the raw params as sent (always a JSON object), _meta included.
	Params json.RawMessage
	// Capabilities are the client's capabilities for this request only, raw and decoded.
	CapabilitiesRaw json.RawMessage
	Capabilities    ClientCapabilities
	// ClientInfo is _meta clientInfo when present (display and logging only).
	ClientInfo *Implementation
	// Principal is the key of the caller the front door authenticated (auth.Principal.Key;
	// "" in single-user mode). The face never authenticates: bridge.Door does, before the
	// request reaches it, and hands the principal over in the request context.
	Principal string
	// HTTP is the underlying request (headers; do not read its body).
	HTTP *http.Request

	stream *Stream // serverstream.go
}

// Tasks reports whether this request declared the SEP-2663 extension.
func (r *Request) Tasks() bool { return r.Capabilities.HasExtension(ExtensionTasks) }

// Handler answers validated modern requests. Serve is called concurrently with a ctx that
// ends when the client goes away. It returns the result object (the face adds
// "resultType":"complete" when the result has none) or an error mapped with
// jsonrpc.AsError; -32601 is sent with HTTP 404, -32020/-32021/-32022 with 400.
type Handler interface {
	Serve(ctx context.Context, req *Request) (json.RawMessage, error)
}

// Notifier is implemented by a Handler that acts on client notifications: the face calls
// Notified with each one (and the caller's principal, see Request.Principal) before it
// answers 202. notifications/cancelled naming an open subscriptions/listen is the one the
// bridge acts on (2026-07-28: the client ends a listen with it).
type Notifier interface {
	Notified(ctx context.Context, principal string, m *jsonrpc.Message)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *Request) (json.RawMessage, error)

// Serve implements Handler.
func (f HandlerFunc) Serve(ctx context.Context, req *Request) (json.RawMessage, error) {
	return f(ctx, req)
}

// ServerOptions configure a Server. Handler is required.
type ServerOptions struct {
	Handler Handler
	// MaxBodyBytes caps a POST body (default: internal/defaults).
	MaxBodyBytes int64
	// KeepAlive is the interval of the keep-alive comments on a streamed reply (Stream);
	// default 15 s.
	KeepAlive time.Duration
}

// Server is the 2026-07-28 Streamable HTTP face. Safe for concurrent use. Authentication,
// the Origin check and the rate limit are the front door's (bridge.Door), not the face's.
type Server struct {
	h         Handler
	maxBody   int64
	keepAlive time.Duration
}

// NewServer returns a Server; it panics without a Handler.
func NewServer(o ServerOptions) *Server {
	if o.Handler == nil {
		panic("sep2663: NewServer needs a Handler")
	}
	defaults.Fill(&o.MaxBodyBytes, defaults.Defaults.MaxBodyBytes)
	if o.KeepAlive <= 0 {
		o.KeepAlive = 15 * time.Second
	}
	return &Server{h: o.Handler, maxBody: o.MaxBodyBytes, keepAlive: o.KeepAlive}
}

// Errors of the modern face.
var (
	ErrHeaderMismatch     = jsonrpc.NewError(jsonrpc.CodeHeaderMismatch, "Header mismatch")
	ErrUnsupportedVersion = jsonrpc.NewError(jsonrpc.CodeUnsupportedVersion, "Unsupported protocol version")
	ErrMissingCapability  = jsonrpc.NewError(jsonrpc.CodeMissingCapability, "Missing required client capability")
)

// MissingTasksError is -32021 naming the tasks extension in data.requiredCapabilities.
func MissingTasksError(detail string) *jsonrpc.Error {
	return ErrMissingCapability.Wrapf("%s", detail).WithData(map[string]any{
		"requiredCapabilities": map[string]any{"extensions": map[string]any{ExtensionTasks: map[string]any{}}},
	})
}

// removedMethods are 2025-11-25 task methods that SEP-2663 removed; they answer -32601.
var removedMethods = map[string]bool{"tasks/result": true, "tasks/list": true}

// taskMethods need the tasks extension declared on the request.
var taskMethods = map[string]bool{MethodTasksGet: true, MethodTasksUpdate: true, MethodTasksCancel: true}

// ServeHTTP implements the 2026-07-28 transport.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed: the 2026-07-28 endpoint takes POST only", http.StatusMethodNotAllowed)
		return
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		writeMessage(w, http.StatusUnsupportedMediaType, jsonrpc.NewErrorResponse(jsonrpc.ID{}, jsonrpc.ErrInvalidRequest.Wrapf("Content-Type must be application/json")))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, s.maxBody+1))
	if err != nil || int64(len(body)) > s.maxBody {
		writeMessage(w, http.StatusRequestEntityTooLarge, jsonrpc.NewErrorResponse(jsonrpc.ID{}, jsonrpc.ErrInvalidRequest.Wrapf("body unreadable or too large")))
		return
	}
	msg, err := jsonrpc.Decode(body)
	if err != nil {
		writeMessage(w, http.StatusBadRequest, jsonrpc.NewErrorResponse(jsonrpc.ID{}, err))
		return
	}
	if msg.IsResponse() {
		// A 2026-07-28 server sends no requests, so no response is expected.
		writeMessage(w, http.StatusBadRequest, jsonrpc.NewErrorResponse(jsonrpc.ID{}, jsonrpc.ErrInvalidRequest.Wrapf("unexpected response")))
		return
	}
	if msg.IsNotification() {
		// Closing a stream cancels its request; notifications/cancelled also ends a listen.
		if n, ok := s.h.(Notifier); ok {
			n.Notified(r.Context(), auth.KeyFrom(r.Context()), msg)
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	req, status, verr := s.validate(r, msg)
	if verr != nil {
		writeMessage(w, status, jsonrpc.NewErrorResponse(msg.ID, verr))
		return
	}
	req.stream = newStream(w, r, s.keepAlive)
	res, err := s.h.Serve(r.Context(), req)
	final := &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: msg.ID, Result: withResultType(res)}
	if err != nil {
		final = jsonrpc.NewErrorResponse(msg.ID, err)
	}
	if req.stream.finish(final) { // the reply was a stream: the final message was its last event
		return
	}
	if err != nil {
		writeMessage(w, StatusFor(err), final)
		return
	}
	writeMessage(w, http.StatusOK, final)
}

// validate checks the headers and the _meta envelope (order: see the package flow above).
func (s *Server) validate(r *http.Request, msg *jsonrpc.Message) (*Request, int, error) {
	params := msg.Params
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage("{}")
	}
	hv := r.Header.Get(HeaderProtocolVersion)
	if hv == "" {
		return nil, http.StatusBadRequest, ErrHeaderMismatch.Wrapf("missing %s header", HeaderProtocolVersion)
	}
	meta := gjson.GetBytes(params, "_meta")
	pv := meta.Get(gjson.Escape(MetaProtocolVersion))
	caps := meta.Get(gjson.Escape(MetaClientCapabilities))
	if !pv.Exists() || !caps.Exists() {
		return nil, http.StatusBadRequest, jsonrpc.ErrInvalidParams.Wrapf("_meta must carry %s and %s", MetaProtocolVersion, MetaClientCapabilities)
	}
	if pv.Type != gjson.String {
		return nil, http.StatusBadRequest, jsonrpc.ErrInvalidParams.Wrapf("_meta %s must be a string", MetaProtocolVersion)
	}
	if pv.Str != hv {
		return nil, http.StatusBadRequest, ErrHeaderMismatch.Wrapf("%s header %q does not match _meta protocolVersion %q", HeaderProtocolVersion, hv, pv.Str)
	}
	if hv != ProtocolVersion {
		return nil, http.StatusBadRequest, ErrUnsupportedVersion.WithData(map[string]any{"supported": []string{ProtocolVersion}, "requested": hv})
	}
	if mm, ok := DecodeHeaderValue(r.Header.Get(HeaderMethod)); !ok || mm != msg.Method {
		return nil, http.StatusBadRequest, ErrHeaderMismatch.Wrapf("%s header does not match method %q", HeaderMethod, msg.Method)
	}
	if removedMethods[msg.Method] {
		return nil, http.StatusNotFound, jsonrpc.ErrMethodNotFound.Wrapf("%s was removed by SEP-2663", msg.Method)
	}
	if err := checkName(r.Header, msg.Method, params); err != nil {
		return nil, http.StatusBadRequest, err
	}
	req := &Request{ID: msg.ID, Method: msg.Method, Params: params, CapabilitiesRaw: json.RawMessage(caps.Raw),
		Principal: auth.KeyFrom(r.Context()), HTTP: r}
	if !caps.IsObject() || json.Unmarshal([]byte(caps.Raw), &req.Capabilities) != nil {
		return nil, http.StatusBadRequest, jsonrpc.ErrInvalidParams.Wrapf("_meta %s must be a ClientCapabilities object", MetaClientCapabilities)
	}
	if ci := meta.Get(gjson.Escape(MetaClientInfo)); ci.IsObject() {
		var impl Implementation
		if json.Unmarshal([]byte(ci.Raw), &impl) == nil {
			req.ClientInfo = &impl
		}
	}
	if taskMethods[msg.Method] && !req.Tasks() {
		return nil, http.StatusBadRequest, MissingTasksError(msg.Method + " requires the " + ExtensionTasks + " extension")
	}
	return req, 0, nil
}

// checkName enforces Mcp-Name == params.<field> for the methods that carry one. Optional
// whitespace around the header value is not part of it (RFC 9110 §5.5).
func checkName(h http.Header, method string, params []byte) error {
	field := nameField(method)
	if field == "" {
		return nil
	}
	v := gjson.GetBytes(params, field)
	if v.Type != gjson.String {
		return jsonrpc.ErrInvalidParams.Wrapf("params.%s must be a string", field)
	}
	raw := strings.TrimSpace(h.Get(HeaderName))
	got, ok := DecodeHeaderValue(raw)
	if raw == "" || !ok {
		return ErrHeaderMismatch.Wrapf("missing or malformed %s header (want params.%s)", HeaderName, field)
	}
	if got != v.Str {
		return ErrHeaderMismatch.Wrapf("%s header does not match params.%s", HeaderName, field)
	}
	return nil
}

// StatusFor maps a JSON-RPC error to the HTTP status the 2026-07-28 transport prescribes:
// 400 for the envelope errors and malformed requests, 404 for -32601, else 200.
func StatusFor(err error) int {
	switch jsonrpc.AsError(err).Code {
	case jsonrpc.CodeHeaderMismatch, jsonrpc.CodeMissingCapability, jsonrpc.CodeUnsupportedVersion,
		jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest:
		return http.StatusBadRequest
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	}
	return http.StatusOK
}

// withResultType stamps "resultType":"complete" on a result object that has none (every
// 2026-07-28 result carries one).
func withResultType(res json.RawMessage) json.RawMessage {
	if len(res) == 0 || string(res) == "null" {
		return json.RawMessage(`{"resultType":"complete"}`)
	}
	if res[0] != '{' || gjson.GetBytes(res, "resultType").Exists() {
		return res
	}
	inner := strings.TrimSpace(string(res[1:]))
	if inner == "}" {
		return json.RawMessage(`{"resultType":"complete"}`)
	}
	return json.RawMessage(`{"resultType":"complete",` + inner)
}

func writeMessage(w http.ResponseWriter, status int, m *jsonrpc.Message) {
	b, err := jsonrpc.Encode(m)
	if err != nil {
		b, _ = jsonrpc.Encode(jsonrpc.NewErrorResponse(m.ID, jsonrpc.ErrInternal))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}
