package mapping

import (
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/sep2663"
)

// MaxStatusMessage caps a statusMessage shown to legacy clients, in runes.
const MaxStatusMessage = 1024

var (
	// ErrUnknownStatus: the upstream reported a status outside SEP-2663 and the known draft
	// vocabularies. The caller keeps the last known status and counts an upstream fault.
	ErrUnknownStatus = errors.New("mapping: unknown upstream task status")
	// ErrUnsupportedInput: an upstream input request whose method has no 2025-11-25
	// server→client request (only elicitation/create, sampling/createMessage, roots/list do).
	ErrUnsupportedInput = errors.New("mapping: unsupported input request method")
)

// statusWords maps every accepted spelling (lower case) to its SEP-2663 status: the five
// statuses themselves and the draft vocabularies of early implementations.
var statusWords = map[string]sep2663.TaskStatus{
	"working":        sep2663.StatusWorking,
	"submitted":      sep2663.StatusWorking,
	"pending":        sep2663.StatusWorking,
	"queued":         sep2663.StatusWorking,
	"running":        sep2663.StatusWorking,
	"in_progress":    sep2663.StatusWorking,
	"input_required": sep2663.StatusInputRequired,
	"completed":      sep2663.StatusCompleted,
	"done":           sep2663.StatusCompleted,
	"succeeded":      sep2663.StatusCompleted,
	"success":        sep2663.StatusCompleted,
	"failed":         sep2663.StatusFailed,
	"error":          sep2663.StatusFailed,
	"errored":        sep2663.StatusFailed,
	"cancelled":      sep2663.StatusCancelled,
	"canceled":       sep2663.StatusCancelled,
}

// NormalizeStatus maps a status string from an upstream, including draft vocabularies
// (submitted|pending|queued|running|in_progress → working; done|succeeded|success → completed;
// error|errored → failed; canceled → cancelled), to a SEP-2663 status. Matching ignores ASCII
// case and surrounding ASCII white space; non-ASCII text never matches (no Unicode case
// folding: "ſuccess" is not "success"). ok=false for anything unknown.
func NormalizeStatus(s string) (sep2663.TaskStatus, bool) {
	s = strings.Trim(s, " \t\r\n")
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return "", false
		}
	}
	st, ok := statusWords[strings.ToLower(s)]
	return st, ok
}

// CanTransition reports whether a legacy record may go from status from to status to:
// a terminal status never changes (not even to itself: a terminal record is frozen);
// working and input_required may go to each other, stay, or end in any terminal status.
// from == "" means "no record yet": any known status may be the first. Unknown statuses are
// never legal.
func CanTransition(from, to record.Status) bool {
	if !knownStatus(to) {
		return false
	}
	switch from {
	case "":
		return true
	case record.StatusWorking, record.StatusInputRequired:
		return true
	default: // terminal or unknown
		return false
	}
}

func knownStatus(s record.Status) bool {
	switch s {
	case record.StatusWorking, record.StatusInputRequired, record.StatusCompleted,
		record.StatusFailed, record.StatusCancelled:
		return true
	}
	return false
}

// SanitizeStatusMessage makes upstream text safe to show: \n, \r and \t become spaces; other
// control characters (C0, DEL, C1), bidirectional embedding/override/isolate controls
// (Trojan Source) and invalid UTF-8 are removed; surrounding space is trimmed; the result is
// cut to MaxStatusMessage runes, the last being "…" when it was cut.
func SanitizeStatusMessage(s string) string {
	var b strings.Builder
	b.Grow(min(len(s), 4*MaxStatusMessage))
	n := 0
	cut := false
	s = strings.TrimSpace(s)
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				continue // invalid byte
			}
		}
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			r = ' '
		case unicode.IsControl(r) || isBidiControl(r):
			continue
		}
		if n == MaxStatusMessage {
			cut = true
			break
		}
		b.WriteRune(r)
		n++
	}
	out := strings.TrimSpace(b.String())
	if cut {
		rs := []rune(out)
		out = string(rs[:min(len(rs), MaxStatusMessage-1)]) + "…"
	}
	return out
}

func isBidiControl(r rune) bool {
	return (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069) || r == 0x200E || r == 0x200F || r == 0x061C
}
