package passthrough

import (
	"context"
	"time"
)

// startPurge runs the session purge of the pass-through face's store every PurgeInterval
// (negative: never), as the forward bridge's purge loop does (replica.go): sessions last
// seen longer than SessionRetention ago go. The loop is owned by p.wg and ends with Close.
func (p *Legacy) startPurge() {
	if p.cfg.PurgeInterval <= 0 {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(p.cfg.PurgeInterval)
		defer t.Stop()
		for {
			select {
			case <-p.ctx.Done():
				return
			case <-t.C:
				p.purgeSessions(p.ctx)
			}
		}
	}()
}

func (p *Legacy) purgeSessions(ctx context.Context) {
	n, err := p.cfg.Store.PurgeSessions(ctx, p.cfg.Now().Add(-p.cfg.SessionRetention))
	if err != nil {
		p.log.Warn().Err(err).Msg("session purge failed")
	} else if n > 0 {
		p.log.Info().Int("sessions", n).Msg("session purge")
	}
}
