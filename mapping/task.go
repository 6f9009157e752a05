package mapping

import (
	"time"

	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/record"
)

// TimeLayout is how the bridge writes task times: RFC 3339, UTC, milliseconds, the form the
// TS SDK v1 uses (2026-11-29T07:21:21.240Z).
const TimeLayout = "2006-01-02T15:04:05.000Z"

// FormatTime renders t in TimeLayout.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// TaskToLegacy renders a record as the flat legacy Task: times in TimeLayout (a zero
// LastUpdatedAt shows CreatedAt), ttl null when unlimited, pollInterval omitted when 0.
// The TTL pointer is copied, never shared with the record.
func TaskToLegacy(t *record.Task) legacy.Task {
	updated := t.LastUpdatedAt
	if updated.IsZero() {
		updated = t.CreatedAt
	}
	lt := legacy.Task{
		TaskID:        t.ID,
		Status:        legacy.TaskStatus(t.Status),
		StatusMessage: t.StatusMessage,
		CreatedAt:     FormatTime(t.CreatedAt),
		LastUpdatedAt: FormatTime(updated),
		TTL:           copyTTL(t.TTLMs),
	}
	if t.PollIntervalMs > 0 {
		p := t.PollIntervalMs
		lt.PollInterval = &p
	}
	return lt
}

// CreateResultForLegacy is the CreateTaskResult answering a task-augmented tools/call.
func CreateResultForLegacy(t *record.Task) legacy.CreateTaskResult {
	return legacy.CreateTaskResult{Task: TaskToLegacy(t)}
}

// Defaults for the interval told to legacy clients (design §9: neither 100 ms nor 60 s).
const (
	DefaultPollFloorMs int64 = 500
	DefaultPollCeilMs  int64 = 30_000
)

// ClampPollInterval applies the operator floor/ceiling (design §9) to an upstream
// pollIntervalMs: 0 or negative (absent) gives the floor; below the floor gives the floor;
// above the ceiling gives the ceiling. A floor or ceiling <= 0 is "none"; when the floor
// exceeds the ceiling (misconfiguration), the ceiling wins.
func ClampPollInterval(upstreamMs, floorMs, ceilMs int64) int64 {
	v := upstreamMs
	if v <= 0 || (floorMs > 0 && v < floorMs) {
		v = max(floorMs, 0)
	}
	if ceilMs > 0 && v > ceilMs {
		v = ceilMs
	}
	return v
}

// CapTTL caps a TTL at maxMs (maxMs <= 0: no cap). nil (unlimited) becomes maxMs when there
// is a cap. A negative ttl is nonsense from the upstream and counts as unlimited. The result
// never aliases ttl.
func CapTTL(ttl *int64, maxMs int64) *int64 {
	if ttl != nil && *ttl < 0 {
		ttl = nil
	}
	switch {
	case maxMs <= 0:
		return copyTTL(ttl)
	case ttl == nil || *ttl > maxMs:
		return &maxMs
	default:
		return copyTTL(ttl)
	}
}
