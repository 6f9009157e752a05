package mapping

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/sep2663"
)

var benchResult = json.RawMessage(`{"resultType":"complete","content":[{"type":"text","text":"Computation done after 3s. Result: 42."}],"structuredContent":{"answer":42},"_meta":{"x":1}}`)

// BenchmarkObserve: one upstream tasks/get observation translated.
func BenchmarkObserve(b *testing.B) {
	ttl := int64(60000)
	dt := &sep2663.DetailedTask{Task: sep2663.Task{TaskID: "u", Status: sep2663.StatusCompleted, CreatedAt: "2026-11-29T10:00:00Z",
		LastUpdatedAt: "2026-11-29T10:00:03Z", TTLMs: &ttl}, Result: benchResult}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Observe(dt); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResultForLegacy: resultType stripped, related-task set, other bytes kept.
func BenchmarkResultForLegacy(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ResultForLegacy(benchResult, "0123456789abcdef0123456789abcdef"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStripModern: a pass-through result cleaned for a legacy client.
func BenchmarkStripModern(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := StripModern(benchResult); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTaskToLegacy: a record rendered as the flat 2025-11-25 Task and encoded.
func BenchmarkTaskToLegacy(b *testing.B) {
	ttl := int64(60000)
	now := time.Now().UTC()
	rec := &record.Task{ID: "0123456789abcdef0123456789abcdef", Status: record.StatusWorking, StatusMessage: "working on it",
		CreatedAt: now, LastUpdatedAt: now, TTLMs: &ttl, PollIntervalMs: 500}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(TaskToLegacy(rec)); err != nil {
			b.Fatal(err)
		}
	}
}
