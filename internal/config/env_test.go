package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestUnknownEnv: misspelled variables are named with the closest valid one; settings,
// TASKBRIDGE_CONFIG, the test suite's TASKBRIDGE_TEST_* and other programs' variables are
// not warned about; values are never repeated.
func TestUnknownEnv(t *testing.T) {
	got := UnknownEnv([]string{
		"TASKBRIDGE_KILLSWITCH=true", "TASKBRIDGE_POLL_FLOR_MS=5", "TASKBRIDGE_STORE=sqlite:x", "TASKBRIDGE_CONFIG=/etc/tb.yaml",
		"TASKBRIDGE_TEST_PG=postgres://x", "TASKBRIDGE_WHATEVER_THIS_IS=s3cret", "HOME=/root", "TASKBRIDGE_log_level=debug",
	})
	want := []string{
		"environment variable TASKBRIDGE_KILLSWITCH is not a taskbridge setting and is ignored (did you mean TASKBRIDGE_KILL_SWITCH?)",
		"environment variable TASKBRIDGE_POLL_FLOR_MS is not a taskbridge setting and is ignored (did you mean TASKBRIDGE_POLL_FLOOR_MS?)",
		"environment variable TASKBRIDGE_WHATEVER_THIS_IS is not a taskbridge setting and is ignored (see docs/configuration.md)",
		"environment variable TASKBRIDGE_log_level is not a taskbridge setting and is ignored (did you mean TASKBRIDGE_LOG_LEVEL?)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("UnknownEnv:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if strings.Contains(strings.Join(got, ""), "s3cret") {
		t.Error("a warning repeats a value")
	}
}

// TestDiffMasksSecrets: Diff names the changed keys in documentation order, with secrets
// masked and the auth section only as set or none.
func TestDiffMasksSecrets(t *testing.T) {
	a, b := Default(), Default()
	b.KillSwitch = true
	b.UpstreamAuthorization = "Bearer top-secret"
	b.Store = "postgres://tb:hunter2@db/tb"
	b.Heartbeat = 3 * time.Second
	b.Auth.APIKeys = append(b.Auth.APIKeys, b.Auth.APIKeys...)
	var got []string
	for _, c := range Diff(a, b) {
		got = append(got, c.String())
	}
	want := []string{`upstream_authorization: "" → Bearer ********`, "store: sqlite:taskbridge.db → postgres://tb:********@db/tb",
		"heartbeat: 10s → 3s", "kill_switch: false → true"}
	if !slices.Equal(got, want) {
		t.Errorf("Diff:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestGroupsCoverEveryKey: every key is in exactly one help topic, so none is hidden.
func TestGroupsCoverEveryKey(t *testing.T) {
	seen := map[string]int{}
	for _, g := range Groups() {
		for _, k := range g.Keys {
			seen[k]++
		}
		if ValueType(g.Keys[0]) == "" {
			t.Errorf("key %s has no value type", g.Keys[0])
		}
	}
	for _, k := range Keys() {
		if seen[k] != 1 {
			t.Errorf("key %s is in %d help topics, want 1", k, seen[k])
		}
	}
}
