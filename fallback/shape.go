package fallback

import (
	"errors"
	"slices"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/upstream"
	"github.com/taskbridge/taskbridge/sep2663"
)

// Upstream shapes (design §1): an upstream serves MCP 2026-07-28 (server/discover
// answered with that revision), 2025-11-25 (initialize), or both on one endpoint — a
// dual-era server, such as mcp-go by default, whose tasks may live on either face or on
// both. The bridge probes both faces, records per face whether it has tasks, and picks for
// each client era the face that keeps tasks working (ChooseRoutes).

// Shape is what a probe found: the manifest of each face the upstream serves; nil for a
// face it does not serve.
type Shape struct {
	Modern *UpstreamManifest `json:"modern"` // server/discover answered, listing 2026-07-28
	Legacy *UpstreamManifest `json:"legacy"` // 2025-11-25 (or older) initialize answered
}

// Faces names the faces present: "2026-07-28", "legacy", "dual" or "none".
func (s Shape) Faces() string {
	switch {
	case s.Modern != nil && s.Legacy != nil:
		return "dual"
	case s.Modern != nil:
		return string(EraModern)
	case s.Legacy != nil:
		return string(EraLegacy)
	}
	return "none"
}

// Face returns the manifest of face e (nil when the upstream does not serve it).
func (s Shape) Face(e Era) *UpstreamManifest {
	if e == EraModern {
		return s.Modern
	}
	return s.Legacy
}

// Choice is the upstream face one client era is served by, with a stable reason slug.
type Choice struct {
	Face   Era    `json:"face"`
	Reason string `json:"reason"`
}

// Routes are the faces chosen for both client eras. The route follows from the pair:
// a 2025-11-25 client on the modern face is forward translation, on the legacy face
// pass-through; a 2026-07-28 client on the legacy face is reverse translation, on the
// modern face pass-through.
type Routes struct {
	Legacy Choice `json:"client-2025-11-25"`
	Modern Choice `json:"client-2026-07-28"`
}

// Reasons of a route choice (docs/fallback.md lists them).
const (
	ReasonSameEraTasks  = "same-era-face-has-tasks"        // the client's own revision, with tasks
	ReasonOtherEraTasks = "only-other-face-has-tasks"      // translated to the face with tasks
	ReasonBridgeHosts   = "no-face-has-tasks-bridge-hosts" // 2025-11-25 client: forward, so the bridge may host
	ReasonSameEraNoTask = "no-face-has-tasks-same-era"     // 2026-07-28 client: pass-through
	ReasonOnlyFace      = "only-face"                      // the upstream serves one face
)

// ErrNoFace: the probe found neither face.
var ErrNoFace = errors.New("fallback: the upstream serves neither MCP 2026-07-28 nor 2025-11-25")

// ChooseRoutes picks the face each client era is served by. It is pure.
//
//	2025-11-25 client: legacy face with tasks → pass-through; else modern face with the
//	  tasks extension → forward; else modern face → forward (the bridge may host); else
//	  legacy face → pass-through.
//	2026-07-28 client: modern face with the extension → pass-through; else legacy face with
//	  tasks → reverse; else modern face → pass-through; else legacy face → reverse.
func ChooseRoutes(s Shape) (Routes, error) {
	if s.Modern == nil && s.Legacy == nil {
		return Routes{}, ErrNoFace
	}
	has := func(m *UpstreamManifest) bool { return m != nil && m.Tasks }
	var r Routes
	switch {
	case has(s.Legacy):
		r.Legacy = Choice{EraLegacy, ReasonSameEraTasks}
	case has(s.Modern):
		r.Legacy = Choice{EraModern, ReasonOtherEraTasks}
	case s.Modern != nil && s.Legacy != nil:
		r.Legacy = Choice{EraModern, ReasonBridgeHosts}
	case s.Modern != nil:
		r.Legacy = Choice{EraModern, ReasonOnlyFace}
	default:
		r.Legacy = Choice{EraLegacy, ReasonOnlyFace}
	}
	switch {
	case has(s.Modern):
		r.Modern = Choice{EraModern, ReasonSameEraTasks}
	case has(s.Legacy):
		r.Modern = Choice{EraLegacy, ReasonOtherEraTasks}
	case s.Modern != nil && s.Legacy != nil:
		r.Modern = Choice{EraModern, ReasonSameEraNoTask}
	case s.Modern != nil:
		r.Modern = Choice{EraModern, ReasonOnlyFace}
	default:
		r.Modern = Choice{EraLegacy, ReasonOnlyFace}
	}
	return r, nil
}

// SpeaksModern reports whether a supportedVersions list includes the 2026-07-28 revision
// taskbridge speaks. An empty list (a server that left it out) counts as yes: it answered
// server/discover.
func SpeaksModern(versions []string) bool {
	return len(versions) == 0 || slices.Contains(versions, sep2663.ProtocolVersion)
}

// DiscoverResultIsModern reports whether a server/discover *result* shows a 2026-07-28
// face. A result whose supportedVersions lack 2026-07-28 (mcp-go over stdio in legacy-only
// mode answers discover that way) is a legacy server's.
func DiscoverResultIsModern(d *sep2663.DiscoverResult) bool { return SpeaksModern(d.SupportedVersions) }

// DiscoverMeansLegacy classifies a server/discover failure per 2026-07-28's era detection: a
// JSON-RPC error that is not a modern one (-32020, -32021, -32022), or an HTTP 400/404/405
// without a JSON-RPC body, means a legacy server (go on with initialize); so does a -32022
// whose data.supported lists no 2026-07-28 revision (a dual-era server configured for
// 2025-11-25 only, such as mcp-go's legacy mode). A transport failure (no answer at all)
// or anything else says nothing about the era: false.
func DiscoverMeansLegacy(err error) bool {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		if je.Code == jsonrpc.CodeUnsupportedVersion {
			return onlyOldVersions(je)
		}
		return !slices.Contains([]int64{jsonrpc.CodeHeaderMismatch, jsonrpc.CodeMissingCapability}, je.Code)
	}
	var ue *upstream.Error
	if errors.As(err, &ue) {
		switch ue.Status {
		case 400, 404, 405:
			return true
		}
	}
	return false
}

// onlyOldVersions reports whether a -32022 lists supported versions, none of them 2026-07-28.
func onlyOldVersions(je *jsonrpc.Error) bool {
	sup := gjson.GetBytes(je.Data, "supported")
	if !sup.IsArray() || len(sup.Array()) == 0 {
		return false
	}
	for _, v := range sup.Array() {
		if v.Str == sep2663.ProtocolVersion {
			return false
		}
	}
	return true
}

// AnswerMismatch reports whether an error the upstream gave on face e says it no longer
// serves that face as recorded (upgraded or replaced in place): on the modern face, an
// answer that means "legacy server" (DiscoverMeansLegacy's HTTP statuses; a JSON-RPC
// error only on server/discover, since -32601 is an ordinary answer elsewhere); on the
// legacy face, a 2026-07-28 refusal (-32020, -32021, -32022) or an HTTP 400/405 without a
// JSON-RPC body. The bridge then probes again; it never switches on this alone.
func AnswerMismatch(e Era, method string, err error) bool {
	var je *jsonrpc.Error
	var ue *upstream.Error
	if e == EraModern {
		if method == sep2663.MethodDiscover {
			return DiscoverMeansLegacy(err)
		}
		return errors.As(err, &ue) && (ue.Status == 404 || ue.Status == 405)
	}
	if errors.As(err, &je) {
		return slices.Contains([]int64{jsonrpc.CodeHeaderMismatch, jsonrpc.CodeMissingCapability, jsonrpc.CodeUnsupportedVersion}, je.Code)
	}
	return errors.As(err, &ue) && (ue.Status == 400 || ue.Status == 405)
}
