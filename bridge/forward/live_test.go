package forward_test

import (
	"testing"

	"github.com/taskbridge/taskbridge/bridge/forward"
)

// TestSetHostingPolicy: the taskSupport advertised in tools/list follows a new policy at
// once; an unknown mode is refused and changes nothing.
func TestSetHostingPolicy(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	support := func() string {
		for _, tl := range call(t, c, "tools/list", map[string]any{}).Get("tools").Array() {
			if tl.Get("name").Str == "slow_compute" {
				return tl.Get("execution.taskSupport").Str
			}
		}
		t.Fatal("no slow_compute in tools/list")
		return ""
	}
	before := support()
	if before == "forbidden" {
		t.Fatalf("slow_compute is advertised %q before any override", before)
	}
	if err := e.b.SetHostingPolicy(nil, nil, false, map[string]string{"slow_compute": "forbidden"}); err != nil {
		t.Fatal(err)
	}
	if got := support(); got != "forbidden" {
		t.Errorf("slow_compute after the override: %q, want forbidden", got)
	}
	if err := e.b.SetHostingPolicy(nil, nil, false, map[string]string{"slow_compute": "sometimes"}); err == nil {
		t.Error("an unknown mode was accepted")
	}
	if got := support(); got != "forbidden" {
		t.Errorf("a refused policy changed taskSupport to %q", got)
	}
	if _, err := forward.HostingPolicy(nil, nil, false, map[string]string{"x": "optional"}); err != nil {
		t.Error(err)
	}
}
