// Package verify runs taskbridge's promotion gates (contract, security, recovery,
// cancellation, load, compatibility) against one upstream through one bridge
// configuration, and reports a local verdict: "this upstream, through this bridge, with
// this configuration, on this date". The command (cmd/taskbridge verify) builds the
// bridge exactly as serve does and hands Run a way to start it on a temporary store; Run
// serves it on loopback HTTP, drives it with a built-in 2025-11-25 client and a
// 2026-07-28 client, restarts it between recovery steps, and counts what reaches the
// upstream from the bridge's own upstream client (internal/metrics).
//
// verify calls only the tools the plan names (with its arguments) and tools annotated
// readOnlyHint (with no arguments); it never calls anything else.
package verify

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskbridge/taskbridge/internal/auth"
	"github.com/taskbridge/taskbridge/internal/metrics"
	"github.com/taskbridge/taskbridge/store"
)

// Engine is one running bridge behind its front door, as Options.Start builds it.
type Engine interface {
	http.Handler
	// SetAuth replaces the authenticator (the front door's live setter) and returns the old.
	SetAuth(auth.Authenticator) auth.Authenticator
	// Close stops the bridge (its pollers and streams); the store stays.
	Close(context.Context) error
}

// Options are what the command gives Run.
type Options struct {
	// Start builds and starts the bridge on the run's store with authenticator a (nil: the
	// configuration has no authentication). Run calls it again to restart the bridge.
	Start func(ctx context.Context, a auth.Authenticator) (Engine, error)
	// Metrics is the set the bridge's upstream client counts into (upstream requests by
	// method, from the instrumented transport).
	Metrics *metrics.Metrics
	// Auth is the configured authentication section: it decides the synthetic principals.
	Auth auth.Config
	// Logs returns what the bridge has logged so far (the canary check reads it).
	Logs  func() []byte
	Plan  *Plan
	Facts []Fact
	// Progress receives one line per check as it finishes (nil: none).
	Progress io.Writer
	// MaxConcurrentTasks is the configured cap per principal (0: off): the load gate stays
	// within it and checks the refusal past it.
	MaxConcurrentTasks int
	// Store is the run's temporary store and Retention the configured audit_retention: the
	// load gate runs the bridge's purge on it with its clock set past ttl and retention.
	Store     store.Store
	Retention time.Duration
	// Now is the clock of the report's date (default time.Now).
	Now func() time.Time
	// Forward says the 2025-11-25 face is the forward route, which keeps every task's
	// record: a repeated request id gets the task it made, and a cancel of a cancelled
	// task never reaches the upstream. False: the legacy pass-through, which forwards
	// every request (the recovery gate then finds a cut call's task in tasks/list only).
	Forward bool
	// Front wraps the bridge's handler on the loopback server (nil: nothing in front).
	// Tests put a faulty proxy there.
	Front func(http.Handler) http.Handler
}

// run is one verify run: the loopback server, the current engine, the principals.
type run struct {
	o     Options
	plan  *Plan
	url   string
	hc    *http.Client
	eng   atomic.Pointer[engineBox]
	authn auth.Authenticator
	who   [2]principal
	rep   *Report
	tools *toolInfo

	baseline map[string]string // face → how the task tool's task ends without a restart

	argCanary   string // the secret that replaced the plan's CanaryPlaceholder
	argCanaries int    // how many plan arguments carried it
	restarts    int

	mu      sync.Mutex
	created int // task-augmented or plain tools/call verify sent that reach the upstream
}

type engineBox struct{ Engine }

// principal is one synthetic caller: its credential headers and what it is.
type principal struct {
	header http.Header
	name   string
}

// Run runs every gate and returns the report. An error is a failure to run at all (the
// bridge did not start, the loopback listener failed); a failing gate is in the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	plan := o.Plan
	if plan == nil {
		plan = &Plan{}
	}
	r := &run{o: o, rep: newReport(o, plan), baseline: map[string]string{}, argCanary: canary("arg")}
	r.plan, r.argCanaries = plan.withDefaults().withCanary(r.argCanary)
	if err := r.principals(); err != nil {
		return nil, err
	}
	eng, err := o.Start(ctx, r.authn)
	if err != nil {
		return nil, fmt.Errorf("the bridge did not start: %w", err)
	}
	r.eng.Store(&engineBox{eng})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.eng.Load().ServeHTTP(w, req)
	})
	if o.Front != nil {
		h = o.Front(h)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
		_ = r.eng.Load().Close(sctx)
	}()
	r.url = "http://" + ln.Addr().String() + "/mcp"
	r.hc = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer r.hc.CloseIdleConnections()

	for _, g := range gates {
		g.run(ctx, r)
	}
	r.rep.finish()
	return r.rep, nil
}

// restart closes the running bridge and starts a new one on the same store; the loopback
// address (and so every client's URL and session) stays.
func (r *run) restart(ctx context.Context) error {
	old := r.eng.Load()
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := old.Close(cctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("closing the bridge: %w", err)
	}
	eng, err := r.o.Start(ctx, r.authn)
	if err != nil {
		return fmt.Errorf("restarting the bridge: %w", err)
	}
	r.eng.Store(&engineBox{eng})
	r.restarts++
	return nil
}

// principals makes the two callers: synthetic API keys or trusted-header values of the
// configured kind, the plan's credentials, or (without authentication) two sessions.
func (r *run) principals() error {
	a := r.o.Auth
	switch {
	case len(r.plan.Principals) == 2:
		authn, err := auth.New(a)
		if err != nil {
			return fmt.Errorf("verify: auth: %w", err)
		}
		r.authn = authn
		for i, line := range r.plan.Principals {
			h, err := headerLine(line)
			if err != nil {
				return fmt.Errorf("verify: plan principals[%d]: %w", i, err)
			}
			r.who[i] = principal{header: h, name: fmt.Sprintf("plan principal %d", i+1)}
		}
	case len(a.APIKeys) > 0:
		keys := []auth.APIKey{{Key: canary("key-a"), Principal: "verify-a", Tenant: a.APIKeys[0].Tenant},
			{Key: canary("key-b"), Principal: "verify-b", Tenant: a.APIKeys[0].Tenant}}
		authn, err := auth.New(auth.Config{APIKeys: keys})
		if err != nil {
			return err
		}
		r.authn = authn
		for i, k := range keys {
			r.who[i] = principal{header: http.Header{"Authorization": {"Bearer " + k.Key}}, name: "api key " + k.Principal}
		}
	case a.TrustedHeader != nil:
		th := *a.TrustedHeader
		th.From = []string{"127.0.0.0/8", "::1/128"} // verify's clients are on loopback
		authn, err := auth.New(auth.Config{TrustedHeader: &th})
		if err != nil {
			return err
		}
		r.authn = authn
		for i, id := range []string{"verify-a", "verify-b"} {
			r.who[i] = principal{header: http.Header{http.CanonicalHeaderKey(th.Principal): {id}}, name: th.Principal + ": " + id}
		}
	case a.JWT != nil:
		return errors.New("verify: auth.jwt is configured: the plan must name two credentials (principals: [\"Authorization: Bearer …\", …])")
	default:
		r.who = [2]principal{{name: "session 1"}, {name: "session 2"}}
	}
	return nil
}

// apiKeysRevocable reports whether verify holds the principals' keys (and so can revoke one).
func (r *run) apiKeysRevocable() bool {
	return len(r.plan.Principals) == 0 && len(r.o.Auth.APIKeys) > 0
}

func headerLine(s string) (http.Header, error) {
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			k, v := s[:i], s[i+1:]
			for len(v) > 0 && v[0] == ' ' {
				v = v[1:]
			}
			if k == "" || v == "" {
				break
			}
			return http.Header{http.CanonicalHeaderKey(k): {v}}, nil
		}
	}
	return nil, errors.New(`want "Header: value"`)
}

// canary is a random secret with a recognisable prefix: it must never appear in the logs.
func canary(kind string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "tbverify-" + kind + "-" + hex.EncodeToString(b)
}

// legacy returns a new 2025-11-25 client for principal i (0 or 1), initialized.
func (r *run) legacy(ctx context.Context, i int, caps string) (*legacyClient, error) {
	c := newLegacyClient(r.url, r.hc, r.who[i].header, caps)
	res, err := c.initialize(ctx)
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if res.Error != nil {
		return nil, fmt.Errorf("initialize: %s", res.errText())
	}
	return c, nil
}

// sent records n tools/call requests verify made that reach the upstream once each.
func (r *run) sent(n int) {
	r.mu.Lock()
	r.created += n
	r.mu.Unlock()
}

// step bounds one step by the plan's step timeout.
func (r *run) step(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.plan.StepTimeout)
}
