package fallback

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/upstream"
	"github.com/taskbridge/taskbridge/sep2663"
)

func TestFromDiscover(t *testing.T) {
	var d sep2663.DiscoverResult
	raw := `{"resultType":"complete","supportedVersions":["2026-07-28"],
	  "capabilities":{"tools":{},"extensions":{"z.example/x":{},"io.modelcontextprotocol/tasks":{}}},
	  "ttlMs":60000,"cacheScope":"public","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"S","version":"1.2"}}}`
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		t.Fatal(err)
	}
	m := FromDiscover(&d)
	want := UpstreamManifest{
		Era: EraModern, ProtocolVersion: "2026-07-28", SupportedVersions: []string{"2026-07-28"},
		Server:     Implementation{Name: "S", Version: "1.2"},
		Extensions: []string{"io.modelcontextprotocol/tasks", "z.example/x"}, Tasks: true,
		TaskOperations: []string{"tasks/get", "tasks/update", "tasks/cancel"}, DiscoverTTLMs: 60000, Tools: []Tool{},
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("got  %+v\nwant %+v", m, want)
	}
	d.Capabilities.Extensions = nil
	if m := FromDiscover(&d); m.Tasks || len(m.TaskOperations) != 0 {
		t.Errorf("without the extension: %+v", m)
	}
}

func TestFromInitialize(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		tasks     bool
		ops       []string
	}{
		{"full", `{"protocolVersion":"2025-11-25","capabilities":{"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}},"serverInfo":{"name":"L","version":"0.2.0"}}`,
			true, []string{"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"}},
		{"no tools.call", `{"protocolVersion":"2025-11-25","capabilities":{"tasks":{"list":{}}},"serverInfo":{"name":"L","version":"1"}}`,
			false, []string{"tasks/list"}},
		{"no tasks", `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"L","version":"1"}}`, false, []string{}},
		{"older revision ignores tasks", `{"protocolVersion":"2025-06-18","capabilities":{"tasks":{"requests":{"tools":{"call":{}}}}},"serverInfo":{"name":"L","version":"1"}}`, false, []string{}},
	} {
		m, err := FromInitialize(json.RawMessage(tc.raw))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if m.Era != EraLegacy || m.Tasks != tc.tasks || !reflect.DeepEqual(m.TaskOperations, tc.ops) || m.Server.Name != "L" {
			t.Errorf("%s: %+v", tc.name, m)
		}
	}
	if _, err := FromInitialize(json.RawMessage(`{"capabilities":{}}`)); err == nil {
		t.Error("no protocolVersion: want an error")
	}
}

func TestToolFromJSON(t *testing.T) {
	for _, tc := range []struct {
		era  Era
		raw  string
		want Tool
	}{
		{EraModern, `{"name":"a","annotations":{"readOnlyHint":true}}`, Tool{Name: "a", Mode: ModeUnknown, ReadOnly: true}},
		{EraLegacy, `{"name":"a","annotations":{"idempotentHint":true,"destructiveHint":true}}`, Tool{Name: "a", Mode: ModeForbidden, Idempotent: true, Destructive: true}},
		{EraLegacy, `{"name":"a","execution":{"taskSupport":"required"}}`, Tool{Name: "a", Mode: ModeRequired}},
		{EraModern, `{"name":"a","execution":{"taskSupport":"optional"},"annotations":{"readOnlyHint":"yes"}}`, Tool{Name: "a", Mode: ModeOptional}},
		{EraLegacy, `{"name":"a","execution":{"taskSupport":"sometimes"}}`, Tool{Name: "a", Mode: ModeUnknown}},
	} {
		if got := ToolFromJSON(tc.era, json.RawMessage(tc.raw)); got != tc.want {
			t.Errorf("%s %s: %+v, want %+v", tc.era, tc.raw, got, tc.want)
		}
	}
	tools := ToolsFromList(EraModern, json.RawMessage(`{"tools":[{"name":"x"},{"name":"y"}],"nextCursor":"c"}`))
	if len(tools) != 2 || tools[1].Name != "y" {
		t.Errorf("ToolsFromList: %+v", tools)
	}
}

func TestDiscoverMeansLegacy(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"method not found", jsonrpc.ErrMethodNotFound, true},
		{"TS v1 not initialized", jsonrpc.NewError(-32000, "Bad Request: Server not initialized"), true},
		{"modern header mismatch", jsonrpc.NewError(jsonrpc.CodeHeaderMismatch, "x"), false},
		{"modern unsupported version", jsonrpc.NewError(jsonrpc.CodeUnsupportedVersion, "x"), false},
		{"-32022 listing 2026-07-28", jsonrpc.NewError(jsonrpc.CodeUnsupportedVersion, "x").
			WithData(map[string]any{"supported": []string{"2026-07-28"}, "requested": "2027-01-01"}), false},
		// mcp-go's legacy-only mode: a dual-era server configured without 2026-07-28.
		{"-32022 listing only 2025 revisions", jsonrpc.NewError(jsonrpc.CodeUnsupportedVersion, "x").
			WithData(map[string]any{"supported": []string{"2025-11-25", "2025-06-18"}, "requested": "2026-07-28"}), true},
		{"404 without body", &upstream.Error{Status: 404, Err: errors.New("no body")}, true},
		{"405", &upstream.Error{Status: 405, Err: errors.New("x")}, true},
		{"connection refused", &upstream.Error{Err: errors.New("connection refused")}, false},
		{"200 with HTML", &upstream.Error{Status: 200, Err: errors.New("not JSON-RPC")}, false},
	} {
		if got := DiscoverMeansLegacy(tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
