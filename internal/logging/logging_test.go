package logging

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"
)

// lockedBuffer is a bytes.Buffer safe for the Run goroutine and the test together.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(strings.TrimSpace(l.b.String()), "\n")
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var rfc3339ms = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// TestTimestampsHaveMilliseconds: every JSON line's time is RFC 3339, UTC, with exactly
// three fractional digits, and parses back.
func TestTimestampsHaveMilliseconds(t *testing.T) {
	var buf lockedBuffer
	l := New(&buf, Options{Format: "json", RepeatWindow: -1})
	for range 3 {
		l.Info().Float64("duration_ms", Millis(1500*time.Microsecond)).Msg("request")
		time.Sleep(2 * time.Millisecond)
	}
	for _, line := range buf.lines() {
		ts := gjson.Get(line, "time").Str
		if !rfc3339ms.MatchString(ts) {
			t.Fatalf("time %q in %s: want RFC 3339 with milliseconds, UTC", ts, line)
		}
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
			t.Fatalf("time %q does not parse as RFC 3339: %v", ts, err)
		}
		if got := gjson.Get(line, "duration_ms").Float(); got != 1.5 {
			t.Fatalf("duration_ms = %v in %s, want 1.5", got, line)
		}
	}
}

// TestRepeatsSuppressed: 40 identical warnings in 10 s (4 a second, an outage's pace)
// make one line; the next after the window carries repeated=39; other messages and info
// lines are never suppressed.
func TestRepeatsSuppressed(t *testing.T) {
	var buf lockedBuffer
	clk := &fakeClock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	l := New(&buf, Options{Format: "json", Now: clk.now})
	for i := range 40 {
		l.Warn().Int("n", i).Str("task", "t").Msg("upstream tasks/get failed")
		l.Info().Msg("request")
		clk.add(250 * time.Millisecond)
	}
	l.Warn().Msg("another warning")
	l.Warn().Int("n", 40).Str("task", "t").Msg("upstream tasks/get failed") // 10 s after the first
	var warn []string
	info := 0
	for _, line := range buf.lines() {
		switch gjson.Get(line, "level").Str {
		case "warn":
			warn = append(warn, line)
		case "info":
			info++
		}
	}
	if info != 40 {
		t.Errorf("%d info lines, want 40 (never suppressed)", info)
	}
	if len(warn) != 3 {
		t.Fatalf("warn lines:\n%s\nwant 3", strings.Join(warn, "\n"))
	}
	if gjson.Get(warn[0], "repeated").Exists() || gjson.Get(warn[0], "n").Int() != 0 {
		t.Errorf("first line %s: want the first warning as it was", warn[0])
	}
	if gjson.Get(warn[1], "message").Str != "another warning" {
		t.Errorf("second line %s", warn[1])
	}
	if gjson.Get(warn[2], "repeated").Int() != 39 || gjson.Get(warn[2], "n").Int() != 40 || gjson.Get(warn[2], "task").Str != "t" {
		t.Errorf("line after the window %s: want repeated=39 and its own fields", warn[2])
	}
}

// TestRepeatsSummaryLine: repeats that end inside a window are reported by Run's summary
// once the window has passed, and at shutdown.
func TestRepeatsSummaryLine(t *testing.T) {
	var buf lockedBuffer
	clk := &fakeClock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	l := New(&buf, Options{Format: "json", Now: clk.now, RepeatWindow: 40 * time.Millisecond})
	for range 5 {
		l.Error().Msg("store write failed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	clk.add(time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for len(buf.lines()) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	l.Error().Msg("store write failed") // suppressed again: the summary restarted the window
	cancel()
	<-done
	lines := buf.lines()
	if len(lines) != 3 {
		t.Fatalf("lines:\n%s\nwant the first, a summary, and the shutdown summary", strings.Join(lines, "\n"))
	}
	for i, want := range []int64{0, 4, 1} {
		if got := gjson.Get(lines[i], "repeated").Int(); got != want || gjson.Get(lines[i], "message").Str != "store write failed" ||
			gjson.Get(lines[i], "level").Str != "error" || !rfc3339ms.MatchString(gjson.Get(lines[i], "time").Str) {
			t.Errorf("line %d %s: want repeated=%d, the message, level error, an RFC 3339 ms time", i, lines[i], want)
		}
	}
}

// TestConsoleNoColor: the console format has ANSI colours unless NoColor.
func TestConsoleNoColor(t *testing.T) {
	for _, noColor := range []bool{false, true} {
		var buf lockedBuffer
		l := New(&buf, Options{Format: "console", NoColor: noColor})
		l.Warn().Str("k", "v").Msg("hello")
		out := strings.Join(buf.lines(), "\n")
		if got := strings.Contains(out, "\x1b["); got == noColor {
			t.Errorf("NoColor=%v: escape sequences present=%v in %q", noColor, got, out)
		}
		if !strings.Contains(out, "hello") {
			t.Errorf("console line %q lacks the message", out)
		}
	}
	if !NoColorFromEnv(func(string) string { return "1" }) || NoColorFromEnv(func(string) string { return "" }) {
		t.Error("NO_COLOR: set means no colour, empty means colour")
	}
}

// TestLiveLevel: a Live logger follows SetLevel at once; the access switch flips.
func TestLiveLevel(t *testing.T) {
	t.Cleanup(func() { zerolog.SetGlobalLevel(zerolog.TraceLevel) })
	var buf lockedBuffer
	l := New(&buf, Options{Format: "json", Level: "warn", AccessLog: true})
	l.Live("warn")
	l.Info().Msg("hidden")
	l.SetLevel("debug")
	l.Debug().Msg("shown")
	l.SetLevel("error")
	l.Warn().Msg("hidden too")
	if got := strings.Join(buf.lines(), "\n"); strings.Contains(got, "hidden") || !strings.Contains(got, "shown") {
		t.Errorf("lines after level changes:\n%s", got)
	}
	if !l.AccessLog() {
		t.Error("AccessLog: want true as configured")
	}
	l.SetAccessLog(false)
	if l.AccessLog() {
		t.Error("AccessLog after SetAccessLog(false): true")
	}
}
