package fallback

import (
	"fmt"
	"strings"
	"testing"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// matrix is the whole decision matrix of acceptance 1. Each line is
//
//	client upstream mode | read-only+task read-only+sync other+task other+sync
//
// clients/upstreams: L+ = 2025-11-25 (tasks), L- = older legacy (no tasks) or a legacy
// server without tasks.requests.tools.call, M+ = 2026-07-28 with the tasks extension,
// M- = 2026-07-28 without it. Cells: translate, host, collapse, pass (passthrough),
// 32601 (refuse with -32601), 32014 (refuse with jsonrpc.CodeTaskUnavailable).
const matrix = `
L+ M+ forbidden | host pass 32601 pass
L+ M+ optional  | translate collapse translate collapse
L+ M+ required  | translate collapse translate collapse
L+ M+ unknown   | translate collapse translate collapse
L+ M- forbidden | host pass 32014 pass
L+ M- optional  | host pass 32014 pass
L+ M- required  | host pass 32014 pass
L+ M- unknown   | host pass 32014 pass
L+ L+ forbidden | host pass 32601 pass
L+ L+ optional  | pass pass pass pass
L+ L+ required  | pass pass pass pass
L+ L+ unknown   | host pass 32601 pass
L+ L- forbidden | host pass 32014 pass
L+ L- optional  | host pass 32014 pass
L+ L- required  | host pass 32014 pass
L+ L- unknown   | host pass 32014 pass

L- M+ forbidden | pass pass pass pass
L- M+ optional  | collapse collapse collapse collapse
L- M+ required  | collapse collapse collapse collapse
L- M+ unknown   | collapse collapse collapse collapse
L- M- forbidden | pass pass pass pass
L- M- optional  | pass pass pass pass
L- M- required  | pass pass pass pass
L- M- unknown   | pass pass pass pass
L- L+ forbidden | pass pass pass pass
L- L+ optional  | pass pass pass pass
L- L+ required  | collapse collapse collapse collapse
L- L+ unknown   | pass pass pass pass
L- L- forbidden | pass pass pass pass
L- L- optional  | pass pass pass pass
L- L- required  | pass pass pass pass
L- L- unknown   | pass pass pass pass

M+ M+ forbidden | pass pass pass pass
M+ M+ optional  | pass pass pass pass
M+ M+ required  | pass pass pass pass
M+ M+ unknown   | pass pass pass pass
M+ M- forbidden | pass pass pass pass
M+ M- optional  | pass pass pass pass
M+ M- required  | pass pass pass pass
M+ M- unknown   | pass pass pass pass
M+ L+ forbidden | pass pass pass pass
M+ L+ optional  | translate pass translate pass
M+ L+ required  | translate collapse translate collapse
M+ L+ unknown   | pass pass pass pass
M+ L- forbidden | pass pass pass pass
M+ L- optional  | pass pass pass pass
M+ L- required  | pass pass pass pass
M+ L- unknown   | pass pass pass pass

M- M+ forbidden | pass pass pass pass
M- M+ optional  | pass pass pass pass
M- M+ required  | pass pass pass pass
M- M+ unknown   | pass pass pass pass
M- M- forbidden | pass pass pass pass
M- M- optional  | pass pass pass pass
M- M- required  | pass pass pass pass
M- M- unknown   | pass pass pass pass
M- L+ forbidden | pass pass pass pass
M- L+ optional  | pass pass pass pass
M- L+ required  | collapse collapse collapse collapse
M- L+ unknown   | pass pass pass pass
M- L- forbidden | pass pass pass pass
M- L- optional  | pass pass pass pass
M- L- required  | pass pass pass pass
M- L- unknown   | pass pass pass pass
`

func clientOf(t *testing.T, s string) ClientManifest {
	switch s {
	case "L+":
		return LegacyClient("2025-11-25")
	case "L-":
		return LegacyClient("2025-06-18")
	case "M+":
		return ClientManifest{Era: EraModern, Version: "2026-07-28", Tasks: true}
	case "M-":
		return ClientManifest{Era: EraModern, Version: "2026-07-28"}
	}
	t.Fatalf("bad client %q", s)
	return ClientManifest{}
}

func upstreamOf(t *testing.T, s string) UpstreamManifest {
	switch s {
	case "M+":
		return UpstreamManifest{Era: EraModern, ProtocolVersion: "2026-07-28", Tasks: true}
	case "M-":
		return UpstreamManifest{Era: EraModern, ProtocolVersion: "2026-07-28"}
	case "L+":
		return UpstreamManifest{Era: EraLegacy, ProtocolVersion: "2025-11-25", Tasks: true}
	case "L-":
		return UpstreamManifest{Era: EraLegacy, ProtocolVersion: "2025-06-18"}
	}
	t.Fatalf("bad upstream %q", s)
	return UpstreamManifest{}
}

func cell(d Decision) string {
	switch d.Kind {
	case Passthrough:
		return "pass"
	case Refuse:
		if d.Err == nil {
			return "refuse-without-error"
		}
		return fmt.Sprint(-d.Err.Code)
	}
	return string(d.Kind)
}

func TestDecideMatrix(t *testing.T) {
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(matrix), "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		head, cells, _ := strings.Cut(line, "|")
		h, want := strings.Fields(head), strings.Fields(cells)
		if len(h) != 3 || len(want) != 4 {
			t.Fatalf("bad matrix line %q", line)
		}
		key := strings.Join(h, " ")
		if seen[key] {
			t.Fatalf("matrix line %q twice", key)
		}
		seen[key] = true
		c, u, mode := clientOf(t, h[0]), upstreamOf(t, h[1]), ParseMode(h[2])
		if string(mode) != h[2] {
			t.Fatalf("bad mode %q", h[2])
		}
		i := 0
		for _, readOnly := range []bool{true, false} {
			for _, task := range []bool{true, false} {
				tool := ToolInfo{Tool: Tool{Name: "t", Mode: mode, ReadOnly: readOnly}}
				d := Decide(c, u, tool, Request{Task: task})
				if got := cell(d); got != want[i] {
					t.Errorf("%s readOnly=%v task=%v: %s (%s), want %s", key, readOnly, task, got, d.Reason, want[i])
				}
				checkDecision(t, key, d)
				i++
			}
		}
	}
	if len(seen) != 4*4*4 {
		t.Errorf("matrix has %d lines, want 64 (every client × upstream × mode)", len(seen))
	}
}

// checkDecision asserts what every decision must carry: a reason, and for a refusal an
// error naming what the caller can do.
func checkDecision(t *testing.T, key string, d Decision) {
	t.Helper()
	if d.Reason == "" {
		t.Errorf("%s: %s without a reason", key, d.Kind)
	}
	if (d.Kind == Refuse) != (d.Err != nil) {
		t.Errorf("%s: kind %s with error %v", key, d.Kind, d.Err)
	}
	if d.Err != nil && !strings.Contains(d.Err.Message, "params.task") {
		t.Errorf("%s: refusal %q does not say what to do", key, d.Err.Message)
	}
}

func TestDecideUnavailableNamesCapability(t *testing.T) {
	c := LegacyClient("2025-11-25")
	tool := ToolInfo{Tool: Tool{Name: "confirm_delete", Mode: ModeUnknown, Destructive: true}}
	for _, tc := range []struct {
		up      string
		missing string
	}{{"M-", "io.modelcontextprotocol/tasks"}, {"L-", "tasks.requests.tools.call"}} {
		d := Decide(c, upstreamOf(t, tc.up), tool, Request{Task: true})
		if d.Err == nil || d.Err.Code != jsonrpc.CodeTaskUnavailable {
			t.Fatalf("%s: %+v, want a refusal with %d", tc.up, d, jsonrpc.CodeTaskUnavailable)
		}
		if !strings.Contains(d.Err.Message, tc.missing) || !strings.Contains(string(d.Err.Data), `"missingCapability":"`+tc.missing+`"`) {
			t.Errorf("%s: error %s / %s does not name %s", tc.up, d.Err.Message, d.Err.Data, tc.missing)
		}
		if !strings.Contains(d.Err.Message, "readOnlyHint or idempotentHint") {
			t.Errorf("%s: error %q does not say which tools may be hosted", tc.up, d.Err.Message)
		}
	}
}

func TestDecidePolicy(t *testing.T) {
	c, u := LegacyClient("2025-11-25"), upstreamOf(t, "M-")
	task := Request{Task: true}
	for _, tc := range []struct {
		name   string
		policy Policy
		tool   Tool
		kind   Kind
		reason string
	}{
		{"read-only hint", Policy{}, Tool{Name: "a", ReadOnly: true}, Host, ReasonHostReadOnly},
		{"idempotent hint", Policy{}, Tool{Name: "a", Idempotent: true}, Host, ReasonHostIdempotent},
		{"no hint", Policy{}, Tool{Name: "a", Destructive: true}, Refuse, ReasonNotHostable},
		{"allow-list", Policy{HostAllow: []string{"a"}}, Tool{Name: "a", Destructive: true}, Host, ReasonHostAllowed},
		{"deny-list beats hints", Policy{HostDeny: []string{"a"}}, Tool{Name: "a", ReadOnly: true}, Refuse, ReasonHostDenied},
		{"deny-list beats allow-list", Policy{HostAllow: []string{"a"}, HostDeny: []string{"a"}}, Tool{Name: "a"}, Refuse, ReasonHostDenied},
		{"hosting off", Policy{NoHosting: true, HostAllow: []string{"a"}}, Tool{Name: "a", ReadOnly: true}, Refuse, ReasonHostingOff},
		{"other tool on the lists", Policy{HostAllow: []string{"b"}, HostDeny: []string{"c"}}, Tool{Name: "a", ReadOnly: true}, Host, ReasonHostReadOnly},
	} {
		tool := tc.tool
		tool.Mode = ModeUnknown
		d := Decide(c, u, tc.policy.Apply(tool), task)
		if d.Kind != tc.kind || d.Reason != tc.reason {
			t.Errorf("%s: %s/%s, want %s/%s", tc.name, d.Kind, d.Reason, tc.kind, tc.reason)
		}
		if d.Kind == Refuse && d.Err.Code != jsonrpc.CodeTaskUnavailable {
			t.Errorf("%s: code %d, want %d", tc.name, d.Err.Code, jsonrpc.CodeTaskUnavailable)
		}
	}
}

func TestDecideAdvertiseOverride(t *testing.T) {
	c, up := LegacyClient("2025-11-25"), upstreamOf(t, "M+")
	p := Policy{TaskSupport: map[string]Mode{"f": ModeForbidden, "r": ModeRequired}}
	f := p.Apply(Tool{Name: "f", Mode: ModeUnknown, ReadOnly: true})
	if d := Decide(c, up, f, Request{Task: true}); d.Kind != Refuse || d.Err.Code != jsonrpc.CodeMethodNotFound {
		t.Errorf("override forbidden, task call: %+v, want refuse -32601", d)
	}
	if d := Decide(c, up, f, Request{}); d.Kind != Collapse {
		t.Errorf("override forbidden, plain call: %s, want collapse", d.Kind)
	}
	r := p.Apply(Tool{Name: "r", Mode: ModeUnknown})
	if d := Decide(c, up, r, Request{}); d.Kind != Refuse || d.Err.Code != jsonrpc.CodeMethodNotFound || !strings.Contains(d.Err.Message, "with params.task") {
		t.Errorf("override required, plain call: %+v, want refuse -32601 asking for params.task", d)
	}
	if d := Decide(c, up, r, Request{Task: true}); d.Kind != Translate {
		t.Errorf("override required, task call: %s, want translate", d.Kind)
	}
	// Older clients never see taskSupport, so the override does not bind them.
	if d := Decide(LegacyClient("2025-06-18"), up, r, Request{}); d.Kind != Collapse {
		t.Errorf("override required, 2025-06-18 client: %s, want collapse", d.Kind)
	}
}

func TestTaskSupport(t *testing.T) {
	l := LegacyClient("2025-11-25")
	for _, tc := range []struct {
		up   string
		tool ToolInfo
		want Mode
	}{
		{"M+", ToolInfo{Tool: Tool{Name: "a", Mode: ModeUnknown}}, ModeOptional},
		{"M-", ToolInfo{Tool: Tool{Name: "a", Mode: ModeUnknown, ReadOnly: true}}, ModeOptional},
		{"M-", ToolInfo{Tool: Tool{Name: "a", Mode: ModeUnknown}}, ModeForbidden},
		{"M-", ToolInfo{Tool: Tool{Name: "a", Mode: ModeUnknown, ReadOnly: true}, Host: HostDisabled}, ModeForbidden},
		{"L+", ToolInfo{Tool: Tool{Name: "a", Mode: ModeRequired}}, ModeRequired},
		{"L+", ToolInfo{Tool: Tool{Name: "a", Mode: ModeOptional}}, ModeOptional},
		{"L+", ToolInfo{Tool: Tool{Name: "a", Mode: ModeForbidden}}, ModeForbidden},
		{"L+", ToolInfo{Tool: Tool{Name: "a", Mode: ModeForbidden, Idempotent: true}}, ModeOptional},
		{"M+", ToolInfo{Tool: Tool{Name: "a", Mode: ModeUnknown}, Advertise: ModeRequired}, ModeRequired},
	} {
		if got := TaskSupport(l, upstreamOf(t, tc.up), tc.tool); got != tc.want {
			t.Errorf("%s %+v: %q, want %q", tc.up, tc.tool, got, tc.want)
		}
	}
	if got := TaskSupport(LegacyClient("2025-06-18"), upstreamOf(t, "M+"), ToolInfo{Tool: Tool{Name: "a"}}); got != "" {
		t.Errorf("2025-06-18 client: %q, want none", got)
	}
}
