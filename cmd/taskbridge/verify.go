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
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
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
	tts, err := parseToolTaskSupport(cfg.ToolTaskSupport)
	if err != nil {
		return usageErr(fmt.Errorf("verify: %w", err))
	}
	dir, err := os.MkdirTemp("", "taskbridge-verify-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg.Store = "sqlite:" + filepath.Join(dir, "verify.db")
	rep, live, err := runVerify(ctx, cfg, plan, tts, stderr)
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

// runVerify builds the upstream client and the bridge the way serve does and runs the gates.
// With cfg.Lock it also reads the upstream's pinned facts before the run (the lock's).
func runVerify(ctx context.Context, cfg *config.Config, plan *verify.Plan, tts map[string]string, stderr io.Writer) (*verify.Report, *verify.Lock, error) {
	stderr = &lockedWriter{w: stderr} // the progress lines and a stdio child's stderr
	logs := &logBuffer{}
	log := zerolog.New(logs).Level(zerolog.DebugLevel).With().Timestamp().Logger()
	m := metrics.New(version)
	tl, err := loadTLS(cfg)
	if err != nil {
		return nil, nil, err
	}
	up := upstreamFlags{url: cfg.Upstream, cmd: cfg.UpstreamCmd, closeWait: cfg.UpstreamCloseWait, termWait: cfg.UpstreamTermWait}
	upstream, stop, err := verifyUpstream(up, cfg, m, tl, log, stderr)
	if err != nil {
		return nil, nil, usageErr(err)
	}
	defer shutdownUpstream(stop, up.closeWait+up.termWait+time.Second)
	era := eraModern
	if up.cmd == "" {
		era = verifyEra(ctx, upstream, cfg.StatusTimeout, log)
	}
	if era == eraUnknown {
		return nil, nil, fmt.Errorf("the upstream %s did not answer within %s", up.describe(), cfg.StatusTimeout)
	}
	var live *verify.Lock
	if cfg.Lock != "" {
		var lc *legacy.Client // a 2025-11-25 upstream is read through initialize
		if era == eraLegacy {
			hc, h := upstreamHTTP(cfg, m, tl)
			lc = legacy.NewClient(legacy.ClientOptions{URL: up.url, Header: h, HTTPClient: hc,
				ClientInfo: legacy.Implementation{Name: "taskbridge-lock", Version: version}})
		}
		probe, err := newLockProbe(upstream, lc, cfg)
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
	route := "forward (2025-11-25 clients) + modern pass-through (2026-07-28 clients)"
	if era == eraLegacy {
		route = "reverse (2026-07-28 clients) + legacy pass-through (2025-11-25 clients)"
	}
	start := func(ctx context.Context, a auth.Authenticator) (verify.Engine, error) {
		gate := bridge.NewGate(bridge.GateConfig{Metrics: m, Policy: gatePolicy(cfg)})
		var b mcpBridge
		if era == eraLegacy {
			hc, h := upstreamHTTP(cfg, m, tl)
			hc.Transport = verify.CountHTTP(m, hc.Transport)
			rb, err := newReverseFromConfig(ctx, reverseConfig(cfg, st, log, gate), up.url, h, hc)
			if err != nil {
				return nil, err
			}
			b = rb
		} else {
			bcfg := forwardConfig(cfg, st, upstream, log, m, gate, nil)
			bcfg.ToolTaskSupport = tts
			fb, err := bridge.NewForward(bcfg)
			if err != nil {
				return nil, err
			}
			if err := fb.Start(ctx); err != nil {
				return nil, err
			}
			b = fb
		}
		door, err := bridge.NewDoor(doorConfig(cfg, a, log), b)
		if err != nil {
			_ = b.Close(context.Background())
			return nil, err
		}
		return &verifyEngine{Door: door, b: b}, nil
	}
	rep, err := verify.Run(ctx, verify.Options{Start: start, Metrics: m, Auth: cfg.Auth, Logs: logs.Bytes, Plan: plan,
		Progress: stderr, MaxConcurrentTasks: cfg.MaxConcurrentTasks, Store: st, Retention: cfg.AuditRetention,
		Forward: era != eraLegacy, Front: verifyFront, Facts: []verify.Fact{
			{Name: "bridge", Value: "taskbridge " + version},
			{Name: "upstream", Value: up.describe()},
			{Name: "upstream era", Value: map[upstreamEra]string{eraModern: "2026-07-28", eraLegacy: "2025-11-25"}[era]},
			{Name: "route", Value: route},
			{Name: "configuration", Value: configHash(cfg)},
			{Name: "store", Value: "temporary SQLite (removed at exit)"},
		}})
	return rep, live, err
}

// verifyFront is what sits in front of the bridge verify drives (verify.Options.Front):
// nil in the command; TestVerifyFaultyUpstreams puts a faulty proxy there.
var verifyFront func(http.Handler) http.Handler

// verifyUpstream is openUpstream with a stdio child's requests counted too.
func verifyUpstream(up upstreamFlags, cfg *config.Config, m *metrics.Metrics, tl *tlsSet, log zerolog.Logger, stderr io.Writer) (*sep2663.Client, func(context.Context) error, error) {
	if up.cmd == "" {
		return openUpstream(up, cfg, m, tl, log, stderr)
	}
	argv, err := sep2663.SplitCommand(up.cmd)
	if err != nil {
		return nil, nil, fmt.Errorf("--upstream-cmd: %w", err)
	}
	tr, err := sep2663.StartStdio(sep2663.StdioOptions{Command: argv, Stderr: stderr, Logger: &log,
		CloseWait: up.closeWait, TermWait: up.termWait})
	if err != nil {
		return nil, nil, err
	}
	c := sep2663.NewClient(sep2663.ClientOptions{Transport: verify.CountTransport(m, tr),
		ClientInfo: sep2663.Implementation{Name: "taskbridge", Version: version}})
	return c, tr.Close, nil
}

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
