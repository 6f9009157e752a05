package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func readAll(t *testing.T, in string, limit int) ([]Event, error) {
	t.Helper()
	r := NewReader(strings.NewReader(in), limit)
	var out []Event
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

// TestReader: fields, comments, CRLF, multi-line data, the priming event and a last event
// without its blank line.
func TestReader(t *testing.T) {
	in := ": keep-alive\n\nid: p1-0\ndata: \n\n" +
		"event: message\r\nid: p1-1\r\ndata: {\"a\":\r\ndata:1}\r\n\r\n" +
		"retry: 10\nevent: other\ndata:x\n\n\n" +
		"data: last"
	evs, err := readAll(t, in, 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{ID: "p1-0", Data: []byte{}, HasData: true},
		{ID: "p1-1", Type: "message", Data: []byte("{\"a\":\n1}"), HasData: true},
		{Type: "other", Data: []byte("x"), HasData: true},
		{Data: []byte("last"), HasData: true},
	}
	if len(evs) != len(want) {
		t.Fatalf("got %d events: %+v", len(evs), evs)
	}
	for i := range want {
		g, w := evs[i], want[i]
		if g.ID != w.ID || g.Type != w.Type || string(g.Data) != string(w.Data) || g.HasData != w.HasData {
			t.Errorf("event %d = %+v, want %+v", i, g, w)
		}
	}
	if !evs[0].IsMessage() || evs[2].IsMessage() {
		t.Error("IsMessage")
	}
}

// TestReaderLimit: a line or an event's data above the limit is ErrTooLarge.
func TestReaderLimit(t *testing.T) {
	for _, in := range []string{"data: " + strings.Repeat("x", 100) + "\n\n", strings.Repeat("data: xxxxxxxx\n", 20) + "\n"} {
		if _, err := readAll(t, in, 64); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%.20q…: err %v, want ErrTooLarge", in, err)
		}
	}
}

// TestAppendEvent: the writer's framing reads back as written.
func TestAppendEvent(t *testing.T) {
	for _, c := range []struct{ id, typ, data, want string }{
		{"", "message", `{"a":1}`, "event: message\ndata: {\"a\":1}\n\n"},
		{"p1-3", "message", "a\r\nb", "id: p1-3\nevent: message\ndata: a\ndata: b\n\n"},
		{SeqID("g2", 0), "", "", "id: g2-0\ndata: \n\n"},
	} {
		got := string(AppendEvent(nil, c.id, c.typ, []byte(c.data)))
		if got != c.want {
			t.Errorf("AppendEvent(%q,%q,%q) = %q, want %q", c.id, c.typ, c.data, got, c.want)
		}
		evs, err := readAll(t, got, 1<<10)
		if err != nil || len(evs) != 1 || evs[0].ID != c.id {
			t.Errorf("read back %q: %+v %v", got, evs, err)
		}
	}
	if got := string(Comment("keep-alive")); got != ": keep-alive\n\n" {
		t.Errorf("Comment = %q", got)
	}
}
