package legacy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/auth"
	"github.com/taskbridge/taskbridge/internal/defaults"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// HTTP header names of the 2025-11-25 Streamable HTTP transport.
const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "MCP-Protocol-Version"
)

// headerDefaultVersion is what a request without MCP-Protocol-Version is taken to speak
// (2025-11-25 §Transports: "the server SHOULD assume 2025-03-26").
const headerDefaultVersion = "2025-03-26"

// touchEvery bounds how often a session's LastSeenAt is written: once a minute is precise
// enough for the migration report and keeps the store out of the hot path.
const touchEvery = time.Minute

// maxSessionIDLen bounds the Mcp-Session-Id values looked up in the store. Minted ids are
// 26 characters; anything much longer is not ours.
const maxSessionIDLen = 128

// Session errors. The 404 code -32001 is what the TypeScript SDK sends, so its clients
// recognise it and re-initialize.
var (
	errSessionRequired = jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Bad Request: Mcp-Session-Id header is required")
	errSessionNotFound = jsonrpc.NewError(jsonrpc.CodeSessionNotFound, "Session not found")
	errInitWithSession = jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Bad Request: initialize must not carry Mcp-Session-Id")
	errBadVersion      = jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Bad Request: unsupported MCP-Protocol-Version")
)

// newSessionID mints a session id: 130 random bits from crypto/rand as 26 base32
// characters, all visible ASCII (0x21–0x7E) as the transport requires.
func newSessionID() string { return rand.Text() }

// validSessionID reports whether id could have been minted by some replica: bounded length
// and visible ASCII only. Other values are answered 404 without a store round trip.
func validSessionID(id string) bool {
	if id == "" || len(id) > maxSessionIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7E {
			return false
		}
	}
	return true
}

// supportedVersion reports whether v is a protocol revision this face speaks.
func supportedVersion(v string) bool { return slices.Contains(SupportedVersions, v) }

// negotiateVersion applies the initialize rule: the client's version when negotiated
// (NegotiatedVersions), else the newest one.
func negotiateVersion(clientVersion string) string {
	if slices.Contains(NegotiatedVersions, clientVersion) {
		return clientVersion
	}
	return ProtocolVersion
}

// checkInitializeParams enforces what InitializeRequestParams requires (every revision
// this face speaks): protocolVersion a string, capabilities an object, clientInfo an
// Implementation with a string name and version. A request without them is -32602, not a
// session with guessed defaults.
func checkInitializeParams(params json.RawMessage) error {
	p := gjson.ParseBytes(params)
	switch {
	case !p.IsObject():
		return jsonrpc.ErrInvalidParams.Wrapf("initialize: params must be an object with protocolVersion, capabilities and clientInfo")
	case p.Get("protocolVersion").Type != gjson.String:
		return jsonrpc.ErrInvalidParams.Wrapf("initialize: params.protocolVersion must be a string")
	case !p.Get("capabilities").IsObject():
		return jsonrpc.ErrInvalidParams.Wrapf("initialize: params.capabilities must be an object")
	case !p.Get("clientInfo").IsObject():
		return jsonrpc.ErrInvalidParams.Wrapf("initialize: params.clientInfo must be an object")
	case p.Get("clientInfo.name").Type != gjson.String || p.Get("clientInfo.version").Type != gjson.String:
		return jsonrpc.ErrInvalidParams.Wrapf("initialize: params.clientInfo needs a string name and version")
	}
	return nil
}

// clientInfoFieldMax is how many bytes of name, version and title an over-size clientInfo
// keeps (the report, the metrics and the upstream envelope use no other member).
const clientInfoFieldMax = 256

// newSession builds the record for an initialize request. Params stay raw: clientInfo and
// capabilities are kept byte for byte, within the face's size bound (sessionInfo).
func (srv *Server) newSession(params json.RawMessage) (*Session, error) {
	now := srv.now()
	s := &Session{
		ID:         newSessionID(),
		CreatedAt:  now,
		LastSeenAt: now,
	}
	if err := checkInitializeParams(params); err != nil {
		return nil, err
	}
	s.ProtocolVersion = negotiateVersion(gjson.GetBytes(params, "protocolVersion").Str)
	info, caps, err := srv.sessionInfo(params)
	if err != nil {
		return nil, err
	}
	s.ClientInfo, s.ClientCapabilities = info, caps
	return s, nil
}

// sessionInfo returns the clientInfo and capabilities to store, bounded so that sessions
// (kept for the report window, cached in memory) cost a known amount each: a clientInfo
// over the bound keeps only its name, version and title (each cut to clientInfoFieldMax
// bytes), which is all the bridge uses; capabilities over it refuse the initialize with
// -32602, since cutting them would change what the client can do.
func (srv *Server) sessionInfo(params json.RawMessage) (info, caps json.RawMessage, err error) {
	limit := srv.maxInfo
	if limit <= 0 {
		limit = defaults.Defaults.MaxSessionInfoBytes
	}
	if r := gjson.GetBytes(params, "capabilities"); r.IsObject() {
		if len(r.Raw) > limit {
			return nil, nil, jsonrpc.ErrInvalidParams.Wrapf("initialize: params.capabilities is %d bytes; this bridge accepts at most %d (max_session_info_bytes)", len(r.Raw), limit)
		}
		caps = json.RawMessage(r.Raw)
	}
	if r := gjson.GetBytes(params, "clientInfo"); r.IsObject() {
		info = json.RawMessage(r.Raw)
		if len(r.Raw) > limit {
			srv.log.Warn().Int("bytes", len(r.Raw)).Int("limit", limit).Msg("legacy: clientInfo over max_session_info_bytes; keeping its name, version and title only")
			info = reducedClientInfo(r)
		}
	}
	return info, caps, nil
}

// reducedClientInfo keeps the string members name, version and title of an Implementation,
// each cut to clientInfoFieldMax bytes at a character boundary.
func reducedClientInfo(r gjson.Result) json.RawMessage {
	var small struct {
		Name    string `json:"name,omitempty"`
		Version string `json:"version,omitempty"`
		Title   string `json:"title,omitempty"`
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"name", &small.Name}, {"version", &small.Version}, {"title", &small.Title}} {
		if v := r.Get(f.key); v.Type == gjson.String {
			*f.dst = cutUTF8(v.Str, clientInfoFieldMax)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(small) // strings only: cannot fail
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// cutUTF8 returns at most n bytes of s, not splitting a UTF-8 sequence.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// checkVersionHeader validates MCP-Protocol-Version on a non-initialize request.
func checkVersionHeader(r *http.Request) *jsonrpc.Error {
	v := r.Header.Get(headerProtocolVersion)
	if v == "" || supportedVersion(v) {
		return nil
	}
	return errBadVersion.Wrapf("%q (supported: %s)", v, strings.Join(SupportedVersions, ", "))
}

// session finds the live session a non-initialize request belongs to. On failure it has
// written the HTTP error and returns nil: 400 without the header or with a bad protocol
// version, 404 for an unknown or closed session, 500 when the store fails.
func (s *Server) session(w http.ResponseWriter, r *http.Request) *Session {
	id := r.Header.Get(headerSessionID)
	if id == "" {
		s.httpError(w, http.StatusBadRequest, errSessionRequired)
		return nil
	}
	if e := checkVersionHeader(r); e != nil {
		s.httpError(w, http.StatusBadRequest, e)
		return nil
	}
	if !validSessionID(id) {
		s.httpError(w, http.StatusNotFound, errSessionNotFound)
		return nil
	}
	sess, err := s.sessions.get(r.Context(), id)
	switch {
	case errors.Is(err, ErrNoSession) || (err == nil && (sess.Closed || sess.Principal != auth.KeyFrom(r.Context()))):
		// A session replayed under another principal looks exactly like an unknown one.
		s.httpError(w, http.StatusNotFound, errSessionNotFound)
		return nil
	case err != nil:
		s.log.Error().Err(err).Str("session", id).Msg("legacy: session lookup failed")
		s.httpError(w, http.StatusInternalServerError, jsonrpc.ErrInternal)
		return nil
	}
	s.touch(r.Context(), sess)
	return sess
}

// touch records activity on sess at most once per touchEvery: skipped when the stored
// LastSeenAt is recent (written by any replica) or this process wrote it recently.
func (s *Server) touch(ctx context.Context, sess *Session) {
	now := s.now()
	if now.Sub(sess.LastSeenAt) < touchEvery {
		return
	}
	s.touchMu.Lock()
	if last, ok := s.touched[sess.ID]; ok && now.Sub(last) < touchEvery {
		s.touchMu.Unlock()
		return
	}
	s.touched[sess.ID] = now
	s.sweepTouchedLocked(now)
	s.touchMu.Unlock()
	if err := s.store.TouchSession(ctx, sess.ID, now); err != nil {
		s.log.Warn().Err(err).Str("session", sess.ID).Msg("legacy: touch session failed")
		return
	}
	sess.LastSeenAt = now
}

// sweepTouchedLocked drops entries older than touchEvery, at most once per touchEvery, so
// the map holds only sessions active in the last two minutes. s.touchMu must be held.
func (s *Server) sweepTouchedLocked(now time.Time) {
	if now.Sub(s.lastSweep) < touchEvery {
		return
	}
	s.lastSweep = now
	for id, at := range s.touched {
		if now.Sub(at) >= touchEvery {
			delete(s.touched, id)
		}
	}
}

// forgetTouched drops the throttle entry of a closed session.
func (s *Server) forgetTouched(id string) {
	s.touchMu.Lock()
	delete(s.touched, id)
	s.touchMu.Unlock()
}
