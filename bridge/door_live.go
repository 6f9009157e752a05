package bridge

import (
	"github.com/taskbridge/taskbridge/internal/auth"
)

// authBox holds the door's authenticator (nil: single-user mode) behind an atomic pointer.
type authBox struct{ a auth.Authenticator }

// SetRate replaces the per-principal request rate at once (a configuration reload): every
// key starts with a full bucket at the new rate; 0 lifts the limit. burst < 1 means twice
// the rate, as in DoorConfig.
func (d *Door) SetRate(rate float64, burst int) {
	d.limit.Store(newRateLimiter(rate, burst, d.cfg.Now, d.cfg.Tokens))
}

// SetAuth replaces the authenticator at once (a configuration reload: new API keys, a JWT
// setting) and returns the one it replaced, for the caller to close. Requests already
// authenticated keep their principal; the next one is checked against a. Nil turns
// authentication off (single-user mode).
func (d *Door) SetAuth(a auth.Authenticator) (old auth.Authenticator) {
	return d.authn.Swap(&authBox{a}).a
}
