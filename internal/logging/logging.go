// Package logging builds taskbridge's process logger (zerolog) and holds the controls an
// operator can change on a running process: the level and the access-log switch.
//
// What every line looks like (docs/operations.md, Logs, shows a sample the tests check):
//
//   - JSON on stderr, or the console format on a terminal (log_format); the console format
//     has no colours when NO_COLOR is set to anything but the empty string
//     (https://no-color.org);
//   - "time" is RFC 3339 in UTC with milliseconds: 2026-12-01T09:42:30.123Z;
//   - durations carry their unit in the field name (duration_ms), never a bare number;
//   - a warning or error whose message was written less than a window (10 s) ago is not
//     written again: it is counted, and the next line with that message, or a summary line
//     once the window has passed, carries "repeated": how many were left out. An upstream
//     outage then costs one line per message per window, not one per task per poll.
//
// The level is zerolog's global level, so a filtered event costs nothing to build. That is
// process-wide state: only "serve" (one process, one logger) changes it live.
package logging

import (
	"context"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// TimeFormat is the layout of the "time" field: RFC 3339 with milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// DefaultRepeatWindow is how long a repeated warning or error stays suppressed.
const DefaultRepeatWindow = 10 * time.Second

// Options configures New.
type Options struct {
	Level  string // trace, debug, info, warn, error (default info)
	Format string // auto (console on a terminal), json, console (default auto)
	// NoColor turns colours off in the console format (the NO_COLOR convention).
	NoColor bool
	// AccessLog writes one line per MCP request (default false here; config's default is
	// true, see docs/configuration.md).
	AccessLog bool
	// RepeatWindow is how long a repeated warning stays suppressed; 0: DefaultRepeatWindow,
	// negative: never suppress.
	RepeatWindow time.Duration
	Now          func() time.Time // for tests; default time.Now
}

// Logger is the process logger and its live controls. Safe for concurrent use.
type Logger struct {
	zerolog.Logger
	access  atomic.Bool
	repeats *repeats // nil when suppression is off
}

// NoColorFromEnv reports the NO_COLOR convention for getenv.
func NoColorFromEnv(getenv func(string) string) bool { return getenv("NO_COLOR") != "" }

// New builds the logger writing to w. An unknown level is info.
func New(w io.Writer, o Options) *Logger {
	setFormats()
	if o.Now == nil {
		o.Now = time.Now
	}
	if f, ok := w.(*os.File); o.Format == "console" || ((o.Format == "auto" || o.Format == "") && ok && isTerminal(f)) {
		w = zerolog.ConsoleWriter{Out: w, NoColor: o.NoColor, TimeFormat: TimeFormat}
	}
	l := &Logger{}
	var out io.Writer = w
	if o.RepeatWindow >= 0 {
		if o.RepeatWindow == 0 {
			o.RepeatWindow = DefaultRepeatWindow
		}
		l.repeats = newRepeats(w, o.RepeatWindow, o.Now)
		out = l.repeats
	}
	l.Logger = zerolog.New(out).With().Timestamp().Logger().Level(ParseLevel(o.Level))
	l.access.Store(o.AccessLog)
	return l
}

// setFormats sets zerolog's process-wide field formats (idempotent).
func setFormats() {
	zerolog.TimeFieldFormat = TimeFormat
	zerolog.TimestampFunc = func() time.Time { return time.Now().UTC() }
}

// ParseLevel reads a level name; anything unknown is info.
func ParseLevel(s string) zerolog.Level {
	lvl, err := zerolog.ParseLevel(strings.ToLower(strings.TrimSpace(s)))
	if err != nil || s == "" {
		return zerolog.InfoLevel
	}
	return lvl
}

// Live makes the level a live control: the logger itself lets everything through and
// zerolog's global level filters. Call it once, in the process that owns the logger.
func (l *Logger) Live(level string) {
	l.Logger = l.Logger.Level(zerolog.TraceLevel)
	zerolog.SetGlobalLevel(ParseLevel(level))
}

// SetLevel changes the level of a Live logger at once.
func (l *Logger) SetLevel(level string) { zerolog.SetGlobalLevel(ParseLevel(level)) }

// AccessLog reports whether per-request lines are written (read on every request).
func (l *Logger) AccessLog() bool { return l.access.Load() }

// SetAccessLog turns per-request lines on or off at once.
func (l *Logger) SetAccessLog(on bool) { l.access.Store(on) }

// Run writes the summary lines of suppressed repeats once their window has passed, until
// ctx ends, then writes what is still pending. It blocks; run it on a goroutine the
// caller waits for.
func (l *Logger) Run(ctx context.Context) {
	if l.repeats == nil {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(l.repeats.window / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			l.repeats.flush(true)
			return
		case <-t.C:
			l.repeats.flush(false)
		}
	}
}

// Flush writes the summary lines of every pending repeat now (at shutdown).
func (l *Logger) Flush() {
	if l.repeats != nil {
		l.repeats.flush(true)
	}
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Millis is a duration in milliseconds with microsecond resolution, for duration_ms.
func Millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
