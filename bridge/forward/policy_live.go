package forward

import (
	"fmt"

	"github.com/taskbridge/taskbridge/fallback"
)

// SetHostingPolicy replaces the fallback policy at once (a configuration reload):
// host_allow, host_deny, no_hosting and the taskSupport advertised per tool (toolTaskSupport:
// name → forbidden|optional|required). The next tools/call and tools/list decide by it;
// hosted tasks already running are not affected. An unknown mode is an error and nothing
// changes.
func (b *Bridge) SetHostingPolicy(allow, deny []string, noHosting bool, toolTaskSupport map[string]string) error {
	p, err := HostingPolicy(allow, deny, noHosting, toolTaskSupport)
	if err != nil {
		return err
	}
	b.fb.policy.Store(&p)
	return nil
}

// HostingPolicy builds the fallback policy SetHostingPolicy installs, so a caller can
// check it before committing to a change.
func HostingPolicy(allow, deny []string, noHosting bool, toolTaskSupport map[string]string) (fallback.Policy, error) {
	ts := make(map[string]fallback.Mode, len(toolTaskSupport))
	for name, mode := range toolTaskSupport {
		m := fallback.ParseMode(mode)
		if m == fallback.ModeUnknown {
			return fallback.Policy{}, fmt.Errorf("tool_task_support %s=%s: want forbidden, optional or required", name, mode)
		}
		ts[name] = m
	}
	return fallback.Policy{HostAllow: allow, HostDeny: deny, NoHosting: noHosting, TaskSupport: ts}, nil
}
