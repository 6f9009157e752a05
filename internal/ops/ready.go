package ops

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// DefaultCheckInterval is how old a readiness result may be before /readyz checks again.
const DefaultCheckInterval = 2 * time.Second

// Check is one readiness check.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
	// CheckedAt is when the result was taken (zero for checks of local state).
	CheckedAt time.Time `json:"checkedAt,omitzero"`
}

// readiness holds the live checks behind /readyz: the store takes a real write (the
// heartbeat), the upstream is asked now. Each runs at most once per interval, however
// often /readyz and /status are fetched, and a result is never older than that.
type readiness struct {
	store, upstream *cachedCheck
	drain           *Drain
}

func newReadiness(o Options) *readiness {
	every := o.CheckInterval
	if every <= 0 {
		every = DefaultCheckInterval
	}
	r := &readiness{drain: o.Drain}
	if o.Store != nil {
		r.store = &cachedCheck{name: "store", every: every, log: o.Logger, now: o.Now, fn: o.Store.CheckWritable,
			describe: func(err error) string { return "not writable: " + describe(err, every, true) }}
	}
	if o.UpstreamCheck != nil {
		r.upstream = &cachedCheck{name: "upstream", every: every, log: o.Logger, now: o.Now, fn: o.UpstreamCheck,
			describe: func(err error) string { return describe(err, every, false) }}
	}
	return r
}

// checks runs (or reuses) every check.
func (r *readiness) checks(ctx context.Context) []Check {
	out := make([]Check, 0, 3)
	if r.store == nil {
		out = append(out, Check{Name: "store", Detail: "no store configured"})
	} else {
		out = append(out, r.store.check(ctx))
	}
	if r.upstream == nil {
		out = append(out, Check{Name: "upstream", OK: true})
	} else {
		out = append(out, r.upstream.check(ctx))
	}
	accepting := Check{Name: "accepting", OK: true}
	if r.drain.Draining() {
		accepting = Check{Name: "accepting", Detail: "draining"}
	}
	return append(out, accepting)
}

// checks is kept on the server for the status page.
func (s *server) checks(ctx context.Context) []Check { return s.ready.checks(ctx) }

// readyz answers 200 when every check passes, else 503; the JSON body lists every check
// and names the failed ones.
func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	checks := s.checks(r.Context())
	body := struct {
		Ready  bool     `json:"ready"`
		Failed []string `json:"failed"`
		Checks []Check  `json:"checks"`
	}{Ready: true, Failed: []string{}, Checks: checks}
	for _, c := range checks {
		if !c.OK {
			body.Ready = false
			body.Failed = append(body.Failed, c.Name)
		}
	}
	code := http.StatusOK
	if !body.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, body)
}

// cachedCheck runs fn at most once per every; concurrent callers share one run. A
// transition between passing and failing is logged once (a scraped check must not log
// every few seconds). mu guards the fields below it.
type cachedCheck struct {
	name     string
	every    time.Duration
	fn       func(context.Context) error
	describe func(error) string
	log      zerolog.Logger
	now      func() time.Time

	mu      sync.Mutex
	at      time.Time
	err     error
	running chan struct{} // non-nil while a run is in progress; closed when it ends
}

func (c *cachedCheck) check(ctx context.Context) Check {
	c.mu.Lock()
	if !c.at.IsZero() && c.now().Sub(c.at) < c.every {
		defer c.mu.Unlock()
		return c.result()
	}
	if ch := c.running; ch != nil {
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return Check{Name: c.name, Detail: "check still running"}
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.result()
	}
	ch := make(chan struct{})
	c.running = ch
	c.mu.Unlock()

	// The run outlives a scrape that gives up: its result serves the next one.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.every)
	err := c.fn(rctx)
	cancel()

	c.mu.Lock()
	defer c.mu.Unlock()
	switch was := c.err; {
	case err != nil && (was == nil || c.at.IsZero()):
		c.log.Warn().Err(err).Str("check", c.name).Msg("readiness check failed: not ready")
	case err == nil && was != nil:
		c.log.Info().Str("check", c.name).Msg("readiness check passes again")
	}
	c.at, c.err, c.running = c.now(), err, nil
	close(ch)
	return c.result()
}

// result renders the last run. c.mu is held.
func (c *cachedCheck) result() Check {
	if c.err != nil {
		return Check{Name: c.name, Detail: c.describe(c.err), CheckedAt: c.at.UTC()}
	}
	return Check{Name: c.name, OK: true, CheckedAt: c.at.UTC()}
}

// describe says what failed without the whole error text, which may hold internal
// addresses (the log has it in full). With tail, an unclassified error shows its last
// part, the driver's own words ("disk I/O error (778)", "cannot execute INSERT in a
// read-only transaction (SQLSTATE 25006)").
func describe(err error, limit time.Duration, tail bool) string {
	var (
		errno syscall.Errno
		dns   *net.DNSError
		op    *net.OpError
		je    *jsonrpc.Error
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer within " + limit.String()
	case errors.As(err, &dns):
		return "unreachable: host name not found"
	case errors.As(err, &errno):
		return "unreachable: " + errno.Error()
	case errors.As(err, &op):
		return "unreachable: " + op.Op + " failed"
	case errors.As(err, &je):
		return "answered with error " + itoa(int(je.Code))
	case tail:
		msg := err.Error()
		if i := strings.LastIndex(msg, ": "); i >= 0 {
			msg = msg[i+2:]
		}
		return strings.TrimPrefix(msg, "ERROR: ")
	}
	return "failed (see the log)"
}
