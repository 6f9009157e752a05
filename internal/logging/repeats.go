package logging

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"
)

// maxRepeatKeys bounds the messages remembered; messages are constants in the code, so the
// bound is only a guard against a message built from data.
const maxRepeatKeys = 1024

// repeats is the zerolog.LevelWriter that suppresses repeated warnings and errors (see the
// package comment). Lines of other levels pass untouched. mu guards seen.
type repeats struct {
	out    io.Writer
	window time.Duration
	now    func() time.Time

	mu   sync.Mutex
	seen map[string]*repeat // level + "\x00" + message
}

// repeat is the state of one message: when it was last written and how many times it was
// left out since.
type repeat struct {
	level      zerolog.Level
	msg        string
	at         time.Time
	suppressed int
}

func newRepeats(out io.Writer, window time.Duration, now func() time.Time) *repeats {
	return &repeats{out: out, window: window, now: now, seen: map[string]*repeat{}}
}

// Write passes a line without a level through.
func (r *repeats) Write(p []byte) (int, error) { return r.out.Write(p) }

// WriteLevel writes p unless it repeats a warning or error written within the window.
func (r *repeats) WriteLevel(l zerolog.Level, p []byte) (int, error) {
	if l != zerolog.WarnLevel && l != zerolog.ErrorLevel {
		return r.out.Write(p)
	}
	msg := gjson.GetBytes(p, zerolog.MessageFieldName).Str
	key := l.String() + "\x00" + msg
	now := r.now()
	r.mu.Lock()
	st := r.seen[key]
	if st != nil && now.Sub(st.at) < r.window {
		st.suppressed++
		r.mu.Unlock()
		return len(p), nil
	}
	left := 0
	if st == nil {
		r.evict(now)
		st = &repeat{level: l, msg: msg}
		r.seen[key] = st
	}
	left, st.at, st.suppressed = st.suppressed, now, 0
	r.mu.Unlock()
	if left > 0 {
		if _, err := r.out.Write(withRepeated(p, left)); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return r.out.Write(p)
}

// evict forgets messages whose window has passed with nothing pending, when the map is
// full. r.mu is held.
func (r *repeats) evict(now time.Time) {
	if len(r.seen) < maxRepeatKeys {
		return
	}
	for k, st := range r.seen {
		if st.suppressed == 0 && now.Sub(st.at) >= r.window {
			delete(r.seen, k)
		}
	}
}

// flush writes a summary line for each message with suppressed repeats whose window has
// passed (all of them when all).
func (r *repeats) flush(all bool) {
	now := r.now()
	var lines [][]byte
	r.mu.Lock()
	for _, st := range r.seen {
		if st.suppressed == 0 || (!all && now.Sub(st.at) < r.window) {
			continue
		}
		lines = append(lines, summaryLine(st, now))
		st.at, st.suppressed = now, 0
	}
	r.mu.Unlock()
	for _, l := range lines {
		_, _ = r.out.Write(l)
	}
}

// summaryLine is {"level":…,"repeated":N,"time":…,"message":…} for a message whose
// repeats were all suppressed.
func summaryLine(st *repeat, now time.Time) []byte {
	msg, _ := json.Marshal(st.msg)
	var b bytes.Buffer
	b.WriteString(`{"` + zerolog.LevelFieldName + `":"` + st.level.String() + `","repeated":`)
	b.WriteString(strconv.Itoa(st.suppressed))
	b.WriteString(`,"` + zerolog.TimestampFieldName + `":"` + now.UTC().Format(TimeFormat) + `","` + zerolog.MessageFieldName + `":`)
	b.Write(msg)
	b.WriteString("}\n")
	return b.Bytes()
}

// withRepeated inserts "repeated":n as the first field of the JSON object line p.
func withRepeated(p []byte, n int) []byte {
	i := bytes.IndexByte(p, '{')
	if i < 0 {
		return p
	}
	out := make([]byte, 0, len(p)+24)
	out = append(out, p[:i+1]...)
	out = append(out, `"repeated":`...)
	out = strconv.AppendInt(out, int64(n), 10)
	if len(bytes.TrimSpace(p[i+1:])) > 0 && bytes.TrimSpace(p[i+1:])[0] != '}' {
		out = append(out, ',')
	}
	return append(out, p[i+1:]...)
}
