package interop

import (
	"testing"

	"github.com/taskbridge/taskbridge/internal/fixture"
)

// TestLegacyClientGetsChangeNotifications (issue 16 item 8, forward route): the real TS SDK
// v1 client, through the bridge to the Go fixture with ListChanged, is told tools.listChanged
// and resources.subscribe in initialize, and both are delivered: add_tool upstream reaches
// it as notifications/tools/list_changed on its GET stream, and bump_resource, after its
// resources/subscribe, as notifications/resources/updated.
func TestLegacyClientGetsChangeNotifications(t *testing.T) {
	e := newEnvWith(t, fixture.Options{Name: "interop-upstream", Scale: 0.2, ListChanged: true})
	out := e.run(t, "changes")
	out.checkOK(t)
	if u := out.str("updated", "params", "uri"); u != fixture.CounterURI {
		t.Errorf("resources/updated uri = %q", u)
	}
	if m := out.get("listChanged", "params", "_meta"); m != nil {
		t.Errorf("list_changed carries the upstream listen's _meta: %v", m)
	}
	t.Logf("list_changed after %v add_tool call(s)", out.get("attempts"))
}
