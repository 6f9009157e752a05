package fallback

import (
	"errors"
	"testing"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/upstream"
	"github.com/taskbridge/taskbridge/sep2663"
)

// TestChooseRoutes: every upstream shape (modern, legacy, dual-era with tasks on either
// face, on both, on neither) and the face each client era is served by. docs/fallback.md
// carries the same table.
func TestChooseRoutes(t *testing.T) {
	face := func(e Era, tasks bool) *UpstreamManifest { return &UpstreamManifest{Era: e, Tasks: tasks} }
	for _, tc := range []struct {
		name           string
		shape          Shape
		legacy, modern Choice
	}{
		{"modern with the extension", Shape{Modern: face(EraModern, true)},
			Choice{EraModern, ReasonOtherEraTasks}, Choice{EraModern, ReasonSameEraTasks}},
		{"modern without the extension", Shape{Modern: face(EraModern, false)},
			Choice{EraModern, ReasonOnlyFace}, Choice{EraModern, ReasonOnlyFace}},
		{"legacy with tasks", Shape{Legacy: face(EraLegacy, true)},
			Choice{EraLegacy, ReasonSameEraTasks}, Choice{EraLegacy, ReasonOtherEraTasks}},
		{"legacy without tasks", Shape{Legacy: face(EraLegacy, false)},
			Choice{EraLegacy, ReasonOnlyFace}, Choice{EraLegacy, ReasonOnlyFace}},
		// mcp-go by default: discover answered, tasks only on the 2025-11-25 face.
		{"dual, tasks on the legacy face", Shape{Modern: face(EraModern, false), Legacy: face(EraLegacy, true)},
			Choice{EraLegacy, ReasonSameEraTasks}, Choice{EraLegacy, ReasonOtherEraTasks}},
		{"dual, tasks on the modern face", Shape{Modern: face(EraModern, true), Legacy: face(EraLegacy, false)},
			Choice{EraModern, ReasonOtherEraTasks}, Choice{EraModern, ReasonSameEraTasks}},
		{"dual, tasks on both faces", Shape{Modern: face(EraModern, true), Legacy: face(EraLegacy, true)},
			Choice{EraLegacy, ReasonSameEraTasks}, Choice{EraModern, ReasonSameEraTasks}},
		{"dual, no tasks", Shape{Modern: face(EraModern, false), Legacy: face(EraLegacy, false)},
			Choice{EraModern, ReasonBridgeHosts}, Choice{EraModern, ReasonSameEraNoTask}},
	} {
		r, err := ChooseRoutes(tc.shape)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if r.Legacy != tc.legacy || r.Modern != tc.modern {
			t.Errorf("%s: legacy clients %+v (want %+v), modern clients %+v (want %+v)", tc.name, r.Legacy, tc.legacy, r.Modern, tc.modern)
		}
	}
	if _, err := ChooseRoutes(Shape{}); !errors.Is(err, ErrNoFace) {
		t.Errorf("no face: %v", err)
	}
}

func TestDiscoverResultIsModern(t *testing.T) {
	for _, tc := range []struct {
		versions []string
		want     bool
	}{
		{[]string{"2026-07-28"}, true},
		{[]string{"2026-07-28", "2025-11-25", "2024-11-05"}, true}, // mcp-go dual
		{[]string{"2025-11-25", "2025-06-18"}, false},              // mcp-go legacy mode over stdio
		{nil, true},
	} {
		if got := DiscoverResultIsModern(&sep2663.DiscoverResult{SupportedVersions: tc.versions}); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.versions, got, tc.want)
		}
	}
}

func TestAnswerMismatch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		face   Era
		method string
		err    error
		want   bool
	}{
		{"modern: discover now refused as by a legacy server", EraModern, "server/discover", &upstream.Error{Status: 400, Err: errors.New("x")}, true},
		{"modern: -32601 on tasks/result is an ordinary answer", EraModern, "tasks/result", jsonrpc.ErrMethodNotFound, false},
		{"modern: endpoint without JSON-RPC 405", EraModern, "tools/call", &upstream.Error{Status: 405, Err: errors.New("x")}, true},
		{"modern: connection refused", EraModern, "tools/call", &upstream.Error{Err: errors.New("refused")}, false},
		{"legacy: a 2026-07-28 refusal", EraLegacy, "tools/call", jsonrpc.NewError(jsonrpc.CodeUnsupportedVersion, "x"), true},
		{"legacy: a tool's own error", EraLegacy, "tools/call", jsonrpc.ErrInvalidParams, false},
		{"legacy: 405 on initialize", EraLegacy, "initialize", &upstream.Error{Legacy: true, Status: 405, Err: errors.New("x")}, true},
	} {
		if got := AnswerMismatch(tc.face, tc.method, tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
