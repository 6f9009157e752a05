package mapping

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/sep2663"
)

func TestNormalizeStatus(t *testing.T) {
	want := map[string]sep2663.TaskStatus{
		// SEP-2663 itself
		"working": sep2663.StatusWorking, "input_required": sep2663.StatusInputRequired,
		"completed": sep2663.StatusCompleted, "failed": sep2663.StatusFailed, "cancelled": sep2663.StatusCancelled,
		// draft vocabularies (design §3)
		"submitted": sep2663.StatusWorking, "pending": sep2663.StatusWorking, "queued": sep2663.StatusWorking,
		"running": sep2663.StatusWorking, "in_progress": sep2663.StatusWorking,
		"done": sep2663.StatusCompleted, "succeeded": sep2663.StatusCompleted, "success": sep2663.StatusCompleted,
		"error": sep2663.StatusFailed, "errored": sep2663.StatusFailed,
		"canceled": sep2663.StatusCancelled,
	}
	for word, st := range want {
		for _, in := range []string{word, strings.ToUpper(word), strings.ToUpper(word[:1]) + word[1:], " " + word + "\n"} {
			got, ok := NormalizeStatus(in)
			if !ok || got != st {
				t.Errorf("NormalizeStatus(%q) = %q, %v; want %q", in, got, ok, st)
			}
		}
	}
	for _, in := range []string{"", "paused", "in-progress", "input-required", "complete", "cancel", "ſuccess", "workinǵ", "working\x00", "null", "WORKING!"} {
		if got, ok := NormalizeStatus(in); ok {
			t.Errorf("NormalizeStatus(%q) = %q, true; want unknown", in, got)
		}
	}
}

func TestCanTransition(t *testing.T) {
	all := []record.Status{record.StatusWorking, record.StatusInputRequired, record.StatusCompleted, record.StatusFailed, record.StatusCancelled}
	for _, from := range all {
		for _, to := range all {
			want := !from.Terminal() // from a live status anything known is legal; terminal is frozen
			if got := CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
		if CanTransition(from, "bogus") {
			t.Errorf("CanTransition(%s, bogus) = true", from)
		}
		if !CanTransition("", from) {
			t.Errorf("CanTransition(\"\", %s) = false", from)
		}
		if CanTransition("bogus", from) {
			t.Errorf("CanTransition(bogus, %s) = true", from)
		}
	}
}

func TestSanitizeStatusMessage(t *testing.T) {
	long := strings.Repeat("é", MaxStatusMessage+10)
	cases := []struct{ in, want string }{
		{"ok", "ok"},
		{"line1\nline2\ttab\r", "line1 line2 tab"},
		{"a\x00b\x1bc\x7fd\u0085e", "abcde"},
		{"bidi \u202Eevil\u202C \u2066x\u2069", "bidi evil x"},
		{"bad \xff\xfe utf8", "bad  utf8"},
		{"  padded  ", "padded"},
		{"Tool execution failed: API rate limit exceeded", "Tool execution failed: API rate limit exceeded"},
		{strings.Repeat("x", MaxStatusMessage), strings.Repeat("x", MaxStatusMessage)},
		{long, strings.Repeat("é", MaxStatusMessage-1) + "…"},
	}
	for _, tc := range cases {
		got := SanitizeStatusMessage(tc.in)
		if got != tc.want {
			t.Errorf("SanitizeStatusMessage(%q) = %q, want %q", truncate(tc.in, 40), truncate(got, 40), truncate(tc.want, 40))
		}
		if n := utf8.RuneCountInString(got); n > MaxStatusMessage {
			t.Errorf("length %d > %d", n, MaxStatusMessage)
		}
	}
}

func FuzzNormalizeStatus(f *testing.F) {
	for w := range statusWords {
		f.Add(w)
	}
	f.Add("ſuccess")
	f.Add(" Done\t")
	f.Fuzz(func(t *testing.T, s string) {
		st, ok := NormalizeStatus(s)
		if !ok {
			if st != "" {
				t.Fatalf("unknown %q gave %q", s, st)
			}
			return
		}
		switch st {
		case sep2663.StatusWorking, sep2663.StatusInputRequired, sep2663.StatusCompleted, sep2663.StatusFailed, sep2663.StatusCancelled:
		default:
			t.Fatalf("NormalizeStatus(%q) = %q: not a SEP-2663 status", s, st)
		}
		if again, ok := NormalizeStatus(string(st)); !ok || again != st {
			t.Fatalf("not idempotent: %q → %q → %q", s, st, again)
		}
		if up, _ := NormalizeStatus(asciiUpper(s)); up != st {
			t.Fatalf("case-sensitive: %q → %q, upper → %q", s, st, up)
		}
	})
}

func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}
