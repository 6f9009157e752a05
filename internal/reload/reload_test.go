package reload

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/config"
)

// env is a config file on disk, a loader reading it as serve does (flags given once at
// start, then file and environment on every load), and a Reloader with two appliers: a
// kill switch shaped like the one the work gate takes, and logging.
type env struct {
	t     *testing.T
	file  string
	r     *Reloader
	kill  atomic.Bool
	level atomic.Value
	log   *bytes.Buffer
}

func newEnv(t *testing.T, yaml string, flags ...string) *env {
	t.Helper()
	e := &env{t: t, file: filepath.Join(t.TempDir(), "tb.yaml"), log: &bytes.Buffer{}}
	e.write(yaml)
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	l := config.Register(fs)
	if err := fs.Parse(append([]string{"--config", e.file}, flags...)); err != nil {
		t.Fatal(err)
	}
	load := func() (*config.Config, error) {
		c, err := l.Load(func(string) string { return "" })
		if err == nil {
			err = c.Validate(true)
		}
		return c, err
	}
	boot, err := load()
	if err != nil {
		t.Fatal(err)
	}
	e.kill.Store(boot.KillSwitch)
	e.level.Store(boot.LogLevel)
	e.r = New(boot, load, zerolog.New(e.log))
	must(t, e.r.Register(Applier{Area: "kill switch", Keys: []string{"kill_switch"},
		Prepare: func(next *config.Config) (func(), error) {
			return func() { e.kill.Store(next.KillSwitch) }, nil
		}}))
	must(t, e.r.Register(Applier{Area: "logging", Keys: []string{"log_level", "access_log"},
		Prepare: func(next *config.Config) (func(), error) {
			return func() { e.level.Store(next.LogLevel) }, nil
		}}))
	return e
}

func (e *env) write(yaml string) {
	e.t.Helper()
	if err := os.WriteFile(e.file, []byte(yaml), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

const base = "upstream: http://u:9/mcp\n"

// TestReloadAppliesAndReports: a changed live key is applied and reported with old and new
// values; a key no applier owns is reported as needing a restart and stays as it was; the
// result is logged with what changed.
func TestReloadAppliesAndReports(t *testing.T) {
	e := newEnv(t, base+"kill_switch: false\nlog_level: info\n")
	e.write(base + "kill_switch: true\nlog_level: debug\nheartbeat: 3s\n")
	res := e.r.Reload(context.Background(), "SIGHUP")
	if !res.OK || !e.kill.Load() || e.level.Load() != "debug" {
		t.Fatalf("reload: %+v; kill %v level %v", res, e.kill.Load(), e.level.Load())
	}
	if got := changes(res.Changed); got != "log_level: info → debug; kill_switch: false → true" {
		t.Errorf("changed = %q", got)
	}
	if got := changes(res.NeedsRestart); got != "heartbeat: 10s → 3s" {
		t.Errorf("needsRestart = %q", got)
	}
	line := lastLine(e.log)
	if gjson.Get(line, "message").Str != "configuration reloaded" || gjson.Get(line, "source").Str != "SIGHUP" ||
		gjson.Get(line, "changed.1").Str != "kill_switch: false → true" || gjson.Get(line, "needsRestart.0").Str != "heartbeat: 10s → 3s" {
		t.Errorf("log line %s", line)
	}
	// Back off again: the kill switch goes off; heartbeat still needs the restart.
	e.write(base + "kill_switch: false\nlog_level: debug\nheartbeat: 3s\n")
	res = e.r.Reload(context.Background(), "POST /admin/reload")
	if !res.OK || e.kill.Load() || changes(res.Changed) != "kill_switch: true → false" || changes(res.NeedsRestart) != "heartbeat: 10s → 3s" {
		t.Errorf("second reload: %+v kill %v", res, e.kill.Load())
	}
}

// TestReloadInvalidChangesNothing: a file that does not validate (bad value, unknown key)
// changes nothing, and the result and the log say why, naming the line.
func TestReloadInvalidChangesNothing(t *testing.T) {
	e := newEnv(t, base+"kill_switch: false\n")
	e.write(base + "kill_switch: true\nlog_level: debug\npoll_floor_ms: soon\n")
	res := e.r.Reload(context.Background(), "SIGHUP")
	if res.OK || e.kill.Load() || e.level.Load() != "info" || len(res.Changed) != 0 {
		t.Fatalf("invalid reload applied something: %+v kill %v level %v", res, e.kill.Load(), e.level.Load())
	}
	if !strings.Contains(res.Error, e.file+`:4: poll_floor_ms: want an integer, got "soon"`) {
		t.Errorf("error %q does not say why", res.Error)
	}
	line := lastLine(e.log)
	if gjson.Get(line, "level").Str != "error" || gjson.Get(line, "message").Str != "configuration reload refused" ||
		!strings.Contains(gjson.Get(line, "reason").Str, "poll_floor_ms") {
		t.Errorf("log line %s", line)
	}
	// A later valid file applies from the running state, not from the refused one.
	e.write(base + "kill_switch: true\n")
	if res := e.r.Reload(context.Background(), "SIGHUP"); !res.OK || !e.kill.Load() {
		t.Errorf("valid reload after a refused one: %+v", res)
	}
}

// TestReloadAllOrNothing: when one applier refuses, no applier commits.
func TestReloadAllOrNothing(t *testing.T) {
	e := newEnv(t, base)
	must(t, e.r.Register(Applier{Area: "limits", Keys: []string{"request_rate"},
		Prepare: func(*config.Config) (func(), error) { return nil, errors.New("rate out of range") }}))
	e.write(base + "kill_switch: true\nrequest_rate: 5\n")
	res := e.r.Reload(context.Background(), "SIGHUP")
	if res.OK || e.kill.Load() || !strings.Contains(res.Error, "limits: rate out of range") {
		t.Fatalf("a refused applier: %+v, kill %v", res, e.kill.Load())
	}
}

// TestReloadFlagsWin: a key given as a flag at start keeps the flag's value whatever the
// file says (precedence flag > file, as at start).
func TestReloadFlagsWin(t *testing.T) {
	e := newEnv(t, base, "--kill-switch=false")
	e.write(base + "kill_switch: true\n")
	res := e.r.Reload(context.Background(), "SIGHUP")
	if !res.OK || e.kill.Load() || len(res.Changed) != 0 {
		t.Errorf("file kill_switch over a start flag: %+v, kill %v", res, e.kill.Load())
	}
}

// TestRegisterRefusesDoubleOwner: a key has one applier.
func TestRegisterRefusesDoubleOwner(t *testing.T) {
	e := newEnv(t, base)
	if err := e.r.Register(Applier{Area: "x", Keys: []string{"kill_switch"}}); err == nil {
		t.Error("a second owner of kill_switch was accepted")
	}
	if err := e.r.Register(Applier{Area: "x", Keys: []string{"no_such_key"}}); err == nil {
		t.Error("an unknown key was accepted")
	}
	if got := strings.Join(e.r.LiveKeys(), ","); got != "access_log,kill_switch,log_level" {
		t.Errorf("LiveKeys = %s", got)
	}
}

func changes(cs []config.Change) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.String())
	}
	return strings.Join(out, "; ")
}

func lastLine(b *bytes.Buffer) string {
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	return lines[len(lines)-1]
}

// TestReloadAlways: an Always applier prepares and commits on every reload, changed keys
// or not (the lock file is re-read), and is listed in Applied only when one of its keys
// changed; when it refuses, nothing commits.
func TestReloadAlways(t *testing.T) {
	e := newEnv(t, base)
	var runs atomic.Int32
	var refuse atomic.Bool
	must(t, e.r.Register(Applier{Area: "lock", Keys: []string{"lock", "lock_drift"}, Always: true,
		Prepare: func(*config.Config) (func(), error) {
			if refuse.Load() {
				return nil, errors.New("lock unreadable")
			}
			return func() { runs.Add(1) }, nil
		}}))
	if res := e.r.Reload(context.Background(), "SIGHUP"); !res.OK || runs.Load() != 1 || len(res.Applied) != 0 {
		t.Fatalf("unchanged reload: %+v, runs %d", res, runs.Load())
	}
	e.write(base + "lock_drift: refuse\n")
	if res := e.r.Reload(context.Background(), "SIGHUP"); !res.OK || runs.Load() != 2 || strings.Join(res.Applied, ",") != "lock" {
		t.Fatalf("changed reload: %+v, runs %d", res, runs.Load())
	}
	refuse.Store(true)
	e.write(base + "lock_drift: refuse\nkill_switch: true\n")
	if res := e.r.Reload(context.Background(), "SIGHUP"); res.OK || e.kill.Load() || !strings.Contains(res.Error, "lock: lock unreadable") {
		t.Fatalf("a refusing Always applier: %+v, kill %v", res, e.kill.Load())
	}
}
