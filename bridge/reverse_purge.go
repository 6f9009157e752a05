package bridge

import (
	"context"
	"time"
)

// startPurge runs the session purge of the pass-through face's store every PurgeInterval
// (negative: never), as the forward bridge's purge loop does (replica.go): sessions last
// seen longer than SessionRetention ago go. The loop is owned by r.wg and ends with Close.
func (r *Reverse) startPurge() {
	if r.cfg.PurgeInterval <= 0 {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTicker(r.cfg.PurgeInterval)
		defer t.Stop()
		for {
			select {
			case <-r.ctx.Done():
				return
			case <-t.C:
				r.purgeSessions(r.ctx)
			}
		}
	}()
}

func (r *Reverse) purgeSessions(ctx context.Context) {
	n, err := r.cfg.Store.PurgeSessions(ctx, r.cfg.Now().Add(-r.cfg.SessionRetention))
	if err != nil {
		r.log.Warn().Err(err).Msg("session purge failed")
	} else if n > 0 {
		r.log.Info().Int("sessions", n).Msg("session purge")
	}
}
