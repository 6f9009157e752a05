package child

import (
	"testing"
	"time"
)

// TestRestartBackoffKeepsItsLimits: the restart waits double from RestartMin to RestartMax,
// are jittered (two supervisors do not wait in step), never leave [min, max], and start
// over after Reset (a child that lived long).
func TestRestartBackoffKeepsItsLimits(t *testing.T) {
	lo, hi := 200*time.Millisecond, 30*time.Second
	distinct := map[time.Duration]bool{}
	for range 50 {
		bo := restartBackoff(lo, hi)
		var last time.Duration
		for i := range 20 {
			d := jittered(bo, lo, hi)
			if d < lo || d > hi {
				t.Fatalf("wait %d = %v, outside [%v, %v]", i, d, lo, hi)
			}
			if i == 0 {
				distinct[d] = true
			}
			last = d
		}
		if last < hi*8/10 {
			t.Errorf("after 20 restarts the wait is %v, want near the cap %v", last, hi)
		}
		bo.Reset()
		if d := jittered(bo, lo, hi); d > lo*12/10 {
			t.Errorf("first wait after Reset = %v, want about %v", d, lo)
		}
	}
	if len(distinct) < 10 {
		t.Errorf("first waits of 50 supervisors took %d distinct values: no jitter", len(distinct))
	}
}
