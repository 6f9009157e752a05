package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/internal/auth"
	"github.com/taskbridge/taskbridge/internal/config"
	"github.com/taskbridge/taskbridge/internal/metrics"
	"github.com/taskbridge/taskbridge/internal/verify"
)

// exitError carries an exit status other than 1 (main prints err, if any, and exits code).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErr is an exit-2 error: the command line, the configuration or the plan is wrong.
func usageErr(err error) error { return &exitError{code: 2, err: err} }

var verifyCommand = command{name: "verify",
	synopsis: "verify --upstream URL|--upstream-cmd CMD [--config FILE] [--plan PLAN.yaml] [--json] [--lock FILE]",
	about: "Runs the promotion gates (contract, security, recovery, cancellation, load, compatibility) against the\n" +
		"upstream through an in-process bridge with this configuration on a temporary store, and prints the\n" +
		"verdict table (docs/verify.md). It calls only the tools the plan names and tools annotated\n" +
		"readOnlyHint. --lock FILE writes the pinned facts verified (the lock serve --lock compares the upstream with).\n" +
		"Exit status 0: every gate passed; 1: a gate failed; 2: usage, configuration or plan error.",
	keys: []string{"upstream", "upstream_cmd", "lock"}}

// cmdVerify: "taskbridge verify" (verifyCommand).
func cmdVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	loader := config.RegisterKeys(fs, verifyCommand.keys...)
	planPath := fs.String("plan", "", "the verification plan (YAML `FILE`): the tools to call and how (docs/verify.md)")
	asJSON := fs.Bool("json", false, "print the report as JSON (docs/verify.schema.json)")
	if _, err := parseArgs(fs, verifyCommand, args, stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErr(err)
	}
	cfg, err := loader.Load(os.Getenv)
	if err == nil {
		err = cfg.Validate(true)
	}
	if err != nil {
		return usageErr(fmt.Errorf("verify: configuration:\n%w", err))
	}
	if (cfg.Upstream == "") == (cfg.UpstreamCmd == "") {
		return usageErr(errors.New("verify: give one of --upstream URL and --upstream-cmd CMD"))
	}
	var plan *verify.Plan
	if *planPath != "" {
		if plan, err = verify.LoadPlan(*planPath); err != nil {
			return usageErr(fmt.Errorf("verify: %w", err))
		}
	}
	if _, err := parseToolTaskSupport(cfg.ToolTaskSupport); err != nil {
		return usageErr(fmt.Errorf("verify: %w", err))
	}
	dir, err := os.MkdirTemp("", "taskbridge-verify-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg.Store = "sqlite:" + filepath.Join(dir, "verify.db")
	rep, live, err := runVerify(ctx, cfg, plan, stderr)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if cfg.Lock != "" {
		if err := verify.WriteLock(cfg.Lock, lockedFacts(*live, rep, cfg)); err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		fmt.Fprintf(stderr, "verify: lock written to %s (verdict %s)\n", cfg.Lock, lockedVerdict(rep))
	}
	if *asJSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	if failed := rep.Failed(); len(failed) > 0 {
		return fmt.Errorf("verify: failed: %s", strings.Join(failed, ", "))
	}
	return nil
}

// runVerify builds the upstream clients and the bridge the way serve does (the era router
// over both faces of the upstream: routerConfig, openUpstreams, newRouter) and runs the
// gates. With cfg.Lock it also reads the upstream's pinned facts before the run (the lock's).
func runVerify(ctx context.Context, cfg *config.Config, plan *verify.Plan, stderr io.Writer) (*verify.Report, *verify.Lock, error) {
	stderr = &lockedWriter{w: stderr} // the progress lines and a stdio child's stderr
	logs := &logBuffer{}
	log := zerolog.New(logs).Level(zerolog.DebugLevel).With().Timestamp().Logger()
	m := metrics.New(version)
	tl, err := loadTLS(cfg)
	if err != nil {
		return nil, nil, err
	}
	// Every upstream request of either face is counted by method (verify reads the counts):
	// over HTTP by the instrumented transport and verify.CountHTTP, from a child by its calls.
	up := upstreamFlags{url: cfg.Upstream, cmd: cfg.UpstreamCmd, closeWait: cfg.UpstreamCloseWait,
		termWait: cfg.UpstreamTermWait, onCall: verify.CountCall(m)}
	hc, uh := upstreamHTTP(cfg, m, tl)
	hc.Transport = verify.CountHTTP(m, hc.Transport)
	hooks := &upstreamHooks{}
	ups, err := openUpstreams(up, hc, uh, hooks, log, stderr)
	if err != nil {
		return nil, nil, usageErr(err)
	}
	defer shutdownUpstream(ups.stop, up.closeWait+up.termWait+time.Second)
	var live *verify.Lock
	if cfg.Lock != "" {
		probe, err := newLockProbe(ups.modern, ups.legacy, cfg)
		if err != nil {
			return nil, nil, usageErr(err)
		}
		l, err := probe.live(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("lock: the upstream's facts: %w", err)
		}
		live = &l
	}
	rawStore, err := openStore(ctx, cfg.Store)
	if err != nil {
		return nil, nil, err
	}
	defer rawStore.Close()
	st := m.InstrumentStore(rawStore)
	// Each start builds a router and waits for its first probe. The first is built before
	// the run: what it chose names the era and route facts, and whether the 2025-11-25
	// face is the forward route (verify.Options.Forward).
	routed := func(ctx context.Context) (*bridge.Router, error) {
		gate := bridge.NewGate(bridge.GateConfig{Metrics: m, Policy: gatePolicy(cfg)})
		rcfg, err := routerConfig(cfg, st, log, m, gate, nil, up.describe())
		if err != nil {
			return nil, err
		}
		rt, err := newRouter(rcfg, ups, hooks)
		if err != nil {
			return nil, err
		}
		if err := waitRouted(ctx, rt, cfg.StatusTimeout, up.describe()); err != nil {
			_ = rt.Close(context.WithoutCancel(ctx))
			return nil, err
		}
		return rt, nil
	}
	first, err := routed(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if first != nil { // the run ended before its first start
			_ = first.Close(context.WithoutCancel(ctx))
		}
	}()
	era, route, forward := routedFacts(first)
	start := func(ctx context.Context, a auth.Authenticator) (verify.Engine, error) {
		rt := first
		if first = nil; rt == nil {
			var err error
			if rt, err = routed(ctx); err != nil {
				return nil, err
			}
		}
		door, err := bridge.NewDoor(doorConfig(cfg, a, log), rt)
		if err != nil {
			_ = rt.Close(context.WithoutCancel(ctx))
			return nil, err
		}
		return &verifyEngine{Door: door, b: rt}, nil
	}
	rep, err := verify.Run(ctx, verify.Options{Start: start, Metrics: m, Auth: cfg.Auth, Logs: logs.Bytes, Plan: plan,
		Progress: stderr, MaxConcurrentTasks: cfg.MaxConcurrentTasks, Store: st, Retention: cfg.AuditRetention,
		Forward: forward, Front: verifyFront, Facts: []verify.Fact{
			{Name: "bridge", Value: "taskbridge " + version},
			{Name: "upstream", Value: up.describe()},
			{Name: "upstream era", Value: era},
			{Name: "route", Value: route},
			{Name: "configuration", Value: configHash(cfg)},
			{Name: "store", Value: "temporary SQLite (removed at exit)"},
		}})
	return rep, live, err
}

// verifyFront is what sits in front of the bridge verify drives (verify.Options.Front):
// nil in the command; TestVerifyFaultyUpstreams puts a faulty proxy there.
var verifyFront func(http.Handler) http.Handler

// configHash pins the effective configuration (as config check prints it, secrets
// masked, the temporary store left out).
func configHash(cfg *config.Config) string {
	var b bytes.Buffer
	c := *cfg
	c.Store = ""
	if err := c.Print(&b); err != nil {
		return "unknown"
	}
	sum := sha256.Sum256(b.Bytes())
	return "sha256:" + hex.EncodeToString(sum[:8])
}

// verifyEngine is one bridge behind its door, as verify restarts it.
type verifyEngine struct {
	*bridge.Door
	b mcpBridge
}

func (e *verifyEngine) Close(ctx context.Context) error { return e.b.Close(ctx) }

// logBuffer is the bridge's debug log during verify (the canary check reads it).
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *logBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// Bytes returns a copy of what was logged.
func (s *logBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.buf.Bytes())
}

// lockedWriter serialises writes from verify's progress and a child's stderr copier.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
