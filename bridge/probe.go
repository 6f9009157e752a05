package bridge

// The probe of both faces of one upstream (design §1): server/discover with the
// 2026-07-28 client, then, when it may tell something, a 2025-11-25 initialize with the
// legacy client. Each face found gets its manifest (fallback/), tools included; the
// Router picks the routes from the pair (fallback.ChooseRoutes), and "taskbridge probe"
// prints it. Never the server's name or version: only what each face answers.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/fallback"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/upstream"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
)

// ProbeClients are the clients of one upstream, one per face.
type ProbeClients struct {
	Modern *sep2663.Client
	Legacy *legacy.Client
}

// ErrUpstreamUnreachable wraps the failure of a probe that reached neither face.
var ErrUpstreamUnreachable = errors.New("upstream not reachable")

// ErrUpstreamInvalid wraps the failure of a probe whose upstream answered, but not with
// JSON-RPC: the upstream is reachable, and "not reachable" would send the operator to the
// network (issue 16 item 17).
var ErrUpstreamInvalid = errors.New("invalid upstream reply")

// noAnswer is the class of a probe failure: ErrUpstreamInvalid for a reply that is not
// JSON-RPC, else ErrUpstreamUnreachable.
func noAnswer(err error) error {
	if errors.Is(err, upstream.ErrInvalidReply) {
		return ErrUpstreamInvalid
	}
	return ErrUpstreamUnreachable
}

// peerError is a probe failure as people read it (probe, config check): each JSON-RPC
// error the upstream answered reads "answered -32001: message", not Go's "jsonrpc error
// -32001: message", so a line naming both faces' answers never carries that prefix twice
// (issue 16 item 17). errors.Is and errors.As see the failure itself.
type peerError struct{ err error }

func (e peerError) Error() string { return goRPCText.ReplaceAllString(e.err.Error(), "answered $1: ") }
func (e peerError) Unwrap() error { return e.err }

// goRPCText is the text jsonrpc.Error.Error gives.
var goRPCText = regexp.MustCompile(`jsonrpc error (-?\d+): `)

// Probe reads both faces of the upstream:
//
//	server/discover answered with 2026-07-28 listed     → modern face (tools/list on it)
//	discover refused the modern way (-32020, -32021, or  → modern face, capabilities unknown
//	  -32022 listing 2026-07-28)
//	discover refused as by a legacy server, or answered  → no modern face
//	  without 2026-07-28 (fallback.DiscoverMeansLegacy)
//	no answer at all                                     → unreachable: an error
//
// A -32022 listing 2026-07-28 itself gets one more discover first (retryable).
//
// Then initialize (2025-11-25) when it may find something: no modern face, a modern face
// without the tasks extension, or a discover listing a 2025 revision too (a dual-era
// server); never when the server listed its versions and none is a 2025 revision. An answer is the legacy face (tools/list on it; the session is closed after);
// a refusal means none. The error wraps ErrUpstreamUnreachable when no face answered.
func Probe(ctx context.Context, c ProbeClients) (fallback.Shape, error) {
	s, err := probe(ctx, c)
	if err != nil {
		return s, peerError{err}
	}
	return s, nil
}

func probe(ctx context.Context, c ProbeClients) (fallback.Shape, error) {
	var s fallback.Shape
	d, derr := c.Modern.Discover(ctx)
	if retryable(derr) {
		d, derr = c.Modern.Discover(ctx)
	}
	switch {
	case derr == nil && fallback.DiscoverResultIsModern(d):
		m := fallback.FromDiscover(d)
		if err := listTools(ctx, &m, func(p json.RawMessage) (json.RawMessage, error) {
			return c.Modern.Call(ctx, "tools/list", p, sep2663.RequestMeta{}, nil)
		}); err != nil && !isRPC(err) {
			return s, fmt.Errorf("%w: %w", noAnswer(err), err)
		}
		s.Modern = &m
	case derr == nil, fallback.DiscoverMeansLegacy(derr):
	case isRPC(derr): // a 2026-07-28 refusal of discover itself
		var je *jsonrpc.Error
		errors.As(derr, &je)
		m := fallback.UpstreamManifest{Era: fallback.EraModern, ProtocolVersion: sep2663.ProtocolVersion,
			SupportedVersions: supportedOf(je), Extensions: []string{}, TaskOperations: []string{}, Tools: []fallback.Tool{}}
		s.Modern = &m
	default:
		return s, fmt.Errorf("%w: server/discover: %w", noAnswer(derr), derr)
	}
	if !legacyUseful(s.Modern, d) || c.Legacy == nil {
		return s, nil
	}
	l, err := probeLegacy(ctx, c.Legacy)
	switch {
	case err == nil:
		s.Legacy = l
	case s.Modern == nil && !refused(err):
		return s, fmt.Errorf("%w: server/discover: %v; initialize: %w", noAnswer(err), derr, err)
	case s.Modern == nil:
		return s, fmt.Errorf("%w: server/discover: %v; initialize: %w", fallback.ErrNoFace, derr, err)
	}
	return s, nil
}

// legacyUseful: initialize can tell something (see Probe). Never when the server listed
// its versions (in the discover result or a -32022) and none is a 2025 revision: it said
// it speaks 2026-07-28 only, and an initialize would be a request it does not take (a
// 2026-07-28 client sends MCP-Protocol-Version and _meta on every POST; conformance
// scenario request-metadata).
func legacyUseful(m *fallback.UpstreamManifest, d *sep2663.DiscoverResult) bool {
	if m == nil {
		return true
	}
	versions := m.SupportedVersions
	if d != nil {
		versions = d.SupportedVersions
	}
	hasLegacy := slices.ContainsFunc(versions, func(v string) bool { return slices.Contains(legacy.SupportedVersions, v) })
	if len(versions) > 0 && !hasLegacy {
		return false
	}
	return !m.Tasks || hasLegacy
}

// retryable: discover was refused with -32022 although data.supported lists the version
// it was sent with (2026-07-28), as a server mid-upgrade or behind a mixed load balancer
// may answer. The probe asks once more, with that supported version, before it settles
// for "capabilities unknown".
func retryable(err error) bool {
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeUnsupportedVersion {
		return false
	}
	return slices.Contains(supportedOf(je), sep2663.ProtocolVersion)
}

// probeLegacy opens a 2025-11-25 session, reads its manifest and tools, and closes it.
func probeLegacy(ctx context.Context, lc *legacy.Client) (*fallback.UpstreamManifest, error) {
	sess, err := lc.Connect(ctx)
	if err != nil {
		return nil, err
	}
	defer sess.Close(context.WithoutCancel(ctx))
	_, raw := sess.InitializeResult()
	m, err := fallback.FromInitialize(raw)
	if err != nil {
		return nil, err
	}
	if !gjson.GetBytes(raw, "capabilities.tools").Exists() {
		return &m, nil
	}
	err = listTools(ctx, &m, func(p json.RawMessage) (json.RawMessage, error) {
		return sess.Call(ctx, "tools/list", p, legacy.CallOptions{})
	})
	if err != nil && !isRPC(err) {
		return nil, err
	}
	return &m, nil
}

// listTools reads every tools/list page into m.Tools (at most 100 pages).
func listTools(ctx context.Context, m *fallback.UpstreamManifest, call func(json.RawMessage) (json.RawMessage, error)) error {
	cursor := ""
	for range 100 {
		params := json.RawMessage(`{}`)
		if cursor != "" {
			params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		res, err := call(params)
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		m.Tools = append(m.Tools, fallback.ToolsFromList(m.Era, res)...)
		if cursor = gjson.GetBytes(res, "nextCursor").Str; cursor == "" {
			return nil
		}
	}
	return errors.New("tools/list: more than 100 pages")
}

// refused reports whether initialize was answered, only not as a session: a JSON-RPC
// error or an HTTP refusal (a server that does not speak 2025-11-25).
func refused(err error) bool {
	if isRPC(err) {
		return true
	}
	var ue *upstream.Error
	return errors.As(err, &ue) && ue.Status >= 400 && ue.Status < 500
}

func isRPC(err error) bool {
	var je *jsonrpc.Error
	return errors.As(err, &je)
}

// supportedOf reads a -32022's data.supported.
func supportedOf(je *jsonrpc.Error) []string {
	out := []string{}
	for _, v := range gjson.GetBytes(je.Data, "supported").Array() {
		out = append(out, v.Str)
	}
	return out
}
