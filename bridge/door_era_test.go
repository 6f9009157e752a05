package bridge

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestEraOf: the era comes from the headers where they tell; only a POST without a session
// and without a non-legacy MCP-Protocol-Version looks at the body, and then only at its
// first eraSniffBytes.
func TestEraOf(t *testing.T) {
	meta := `"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`
	cases := []struct {
		name    string
		method  string
		headers map[string]string
		body    string
		want    clientEra
	}{
		{"modern header", "POST", map[string]string{"MCP-Protocol-Version": "2026-07-28"}, `{"method":"tools/list"}`, eraModern},
		{"modern header decides without a body", "POST", map[string]string{"MCP-Protocol-Version": "2026-07-28"}, ``, eraModern},
		{"modern envelope without header", "POST", nil, `{"method":"tools/list",` + meta + `}`, eraModern},
		{"initialize", "POST", nil, `{"method":"initialize","params":{}}`, eraLegacy},
		{"initialize with the modern envelope", "POST", nil, `{"method":"initialize",` + meta + `}`, eraModern},
		{"initialize with a legacy header", "POST", map[string]string{"MCP-Protocol-Version": "2025-11-25"}, `{"method":"initialize",` + meta + `}`, eraLegacy},
		{"legacy session", "POST", map[string]string{"Mcp-Session-Id": "s", "MCP-Protocol-Version": "2026-07-28"}, `{"method":"tools/list"}`, eraLegacy},
		{"legacy version header", "POST", map[string]string{"MCP-Protocol-Version": "2025-11-25"}, `{"method":"tools/list"}`, eraLegacy},
		{"GET", "GET", map[string]string{"MCP-Protocol-Version": "2026-07-28"}, ``, eraLegacy},
		{"DELETE", "DELETE", nil, ``, eraLegacy},
		{"envelope past the sniffed prefix", "POST", nil, `{"method":"tools/list","params":{"pad":"` + strings.Repeat("x", eraSniffBytes) + `",` + meta[len(`"params":{`):] + `}`, eraLegacy},
	}
	for _, c := range cases {
		r := httptest.NewRequest(c.method, "/mcp", nil)
		for k, v := range c.headers {
			r.Header.Set(k, v)
		}
		if got := eraOf(r, []byte(c.body)); got != c.want {
			t.Errorf("%s: era %d, want %d", c.name, got, c.want)
		}
	}
}

// fakeEngine names routes the door has no entry for.
type fakeEngine struct{ ep endpoints }

func (f fakeEngine) endpoints() endpoints { return f.ep }

// TestNewDoorRefusesUnknownRoutes: an engine whose routes are not in the dispatch table
// (a new route nobody registered) cannot get a door.
func TestNewDoorRefusesUnknownRoutes(t *testing.T) {
	for _, ep := range []endpoints{
		{legacyRoute: "sideways", modernRoute: RouteReverse},
		{legacyRoute: RouteForward, modernRoute: RouteForward}, // forward serves legacy clients only
	} {
		if _, err := NewDoor(DoorConfig{}, fakeEngine{ep}); err == nil {
			t.Errorf("NewDoor(%s/%s): no error", ep.legacyRoute, ep.modernRoute)
		}
	}
}
