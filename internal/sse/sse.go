// Package sse is taskbridge's one reader and writer of Server-Sent Events (the
// text/event-stream format of the HTML standard, as MCP's Streamable HTTP transport uses
// it). Every SSE producer (the 2025-11-25 face's POST, GET and resumable streams, the Go
// fixture's listen stream) frames events with AppendEvent, and every consumer (the
// SEP-2663 client, the client of legacy upstreams, the test client) reads them with
// Reader, so the framing rules live in one place:
//
//   - one "data:" line per line of the payload, so a payload carrying a newline still frames;
//   - lines end in "\n" or "\r\n"; a field's value loses one leading space;
//   - ":" lines are comments (keep-alives) and are skipped; "retry" and unknown fields too;
//   - a blank line dispatches the event; an unterminated last event is still delivered;
//   - a line or an event's data above the reader's limit is ErrTooLarge, never a buffer
//     that grows without bound.
//
// Reference: https://html.spec.whatwg.org/multipage/server-sent-events.html
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
)

// Event is one dispatched event. Data is the payload with its lines joined by "\n";
// HasData tells an event with an empty "data:" line (a priming event) from one without any.
type Event struct {
	ID      string
	Type    string // the "event:" field; "" means "message"
	Data    []byte
	HasData bool
}

// IsMessage reports whether the event is of the default type "message".
func (e Event) IsMessage() bool { return e.Type == "" || e.Type == "message" }

// ErrTooLarge is returned by Reader.Next for a line or an event above the limit.
var ErrTooLarge = errors.New("sse: event larger than the limit")

// Reader reads events from a stream. Not safe for concurrent use.
type Reader struct {
	br    *bufio.Reader
	limit int
	done  bool
}

// NewReader reads r; limit bounds one line and one event's data (bytes, > 0).
func NewReader(r io.Reader, limit int) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, min(limit+2, 32<<10)), limit: limit}
}

// Next returns the next event, or io.EOF after the last one. Any other error is the
// stream's (a read error, ErrTooLarge); the event being read when it happened is lost.
func (r *Reader) Next() (Event, error) {
	var ev Event
	if r.done {
		return ev, io.EOF
	}
	for {
		line, err := r.line()
		if err != nil && !errors.Is(err, io.EOF) {
			return Event{}, err
		}
		if errors.Is(err, io.EOF) {
			r.done = true
			if len(line) > 0 {
				if ferr := r.field(&ev, line); ferr != nil {
					return Event{}, ferr
				}
			}
			if ev.HasData || ev.ID != "" || ev.Type != "" {
				return ev, nil // lenient: the last event had no blank line after it
			}
			return Event{}, io.EOF
		}
		if len(line) == 0 {
			if ev.HasData || ev.ID != "" || ev.Type != "" {
				return ev, nil
			}
			continue // blank lines between events
		}
		if err := r.field(&ev, line); err != nil {
			return Event{}, err
		}
	}
}

// field applies one non-empty line to ev.
func (r *Reader) field(ev *Event, line []byte) error {
	if line[0] == ':' {
		return nil // a comment: a keep-alive
	}
	name, value, found := bytes.Cut(line, []byte(":"))
	if found && len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	switch string(name) {
	case "data":
		if ev.HasData {
			ev.Data = append(ev.Data, '\n')
		}
		ev.Data = append(ev.Data, value...)
		ev.HasData = true
		if len(ev.Data) > r.limit {
			return ErrTooLarge
		}
	case "event":
		ev.Type = string(value)
	case "id":
		ev.ID = string(value)
	}
	return nil
}

// line returns the next line without its ending; at the end of input the last partial line
// with io.EOF.
func (r *Reader) line() ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > r.limit+2 {
			return nil, ErrTooLarge
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return line, err
		}
		line = line[:len(line)-1]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		return line, nil
	}
}

// AppendEvent appends one event to dst: "id:" when id is set, "event:" when typ is set,
// then one "data:" line per line of data (a "\r" before a newline is dropped), then the
// blank line that dispatches it. Empty data is one empty "data:" line (a priming event).
func AppendEvent(dst []byte, id, typ string, data []byte) []byte {
	if id != "" {
		dst = append(append(append(dst, "id: "...), id...), '\n')
	}
	if typ != "" {
		dst = append(append(append(dst, "event: "...), typ...), '\n')
	}
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		dst = append(dst, "data: "...)
		dst = append(dst, bytes.TrimSuffix(line, []byte("\r"))...)
		dst = append(dst, '\n')
	}
	return append(dst, '\n')
}

// AppendMessage appends one "message" event (the type MCP uses for every JSON-RPC message).
func AppendMessage(dst []byte, id string, data []byte) []byte {
	return AppendEvent(dst, id, "message", data)
}

// SeqID is the event id "<stream>-<seq>" of a resumable stream's events.
func SeqID(stream string, seq uint64) string { return stream + "-" + strconv.FormatUint(seq, 10) }

// Comment is a comment line (a keep-alive): clients ignore it, proxies see traffic.
func Comment(text string) []byte { return []byte(": " + text + "\n\n") }
