package record

import (
	"testing"
	"time"
)

// TestTerminal: exactly the three end states are terminal; a status never leaves them.
func TestTerminal(t *testing.T) {
	for s, want := range map[Status]bool{StatusWorking: false, StatusInputRequired: false,
		StatusCompleted: true, StatusFailed: true, StatusCancelled: true} {
		if s.Terminal() != want {
			t.Errorf("%s.Terminal() = %v", s, !want)
		}
	}
}

// TestExpiresAt: the ttl counts from creation; a nil ttl never expires.
func TestExpiresAt(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ttl := int64(1500)
	at, ok := (&Task{CreatedAt: created, TTLMs: &ttl}).ExpiresAt()
	if !ok || !at.Equal(created.Add(1500*time.Millisecond)) {
		t.Errorf("ExpiresAt = %v, %v", at, ok)
	}
	if _, ok := (&Task{CreatedAt: created}).ExpiresAt(); ok {
		t.Error("an unlimited ttl expires")
	}
}
