package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/fallback"
	"github.com/taskbridge/taskbridge/internal/config"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/metrics"
	"github.com/taskbridge/taskbridge/internal/ops"
	"github.com/taskbridge/taskbridge/internal/reload"
	"github.com/taskbridge/taskbridge/internal/verify"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
)

// lockProbe reads the upstream's pinned facts (docs/verify.md, "The lock file") as the
// bridge serves them: its identity, and every tool's taskSupport as 2025-11-25 clients are
// told it, with its annotations hashed. verify --lock writes them; serve --lock compares.
type lockProbe struct {
	modern *sep2663.Client // the upstream's 2026-07-28 face (server/discover first)
	legacy *legacy.Client  // its 2025-11-25 face, when discover says it has none; nil: none tried
	policy fallback.Policy // the forward route's hosting policy (it decides the advertised taskSupport)
}

// newLockProbe builds the probe of serve's or verify's upstream with cfg's hosting policy.
func newLockProbe(modern *sep2663.Client, lc *legacy.Client, cfg *config.Config) (*lockProbe, error) {
	tts, err := parseToolTaskSupport(cfg.ToolTaskSupport)
	if err != nil {
		return nil, err
	}
	pol, err := forward.HostingPolicy(cfg.HostAllow, cfg.HostDeny, cfg.NoHosting, tts)
	if err != nil {
		return nil, err
	}
	return &lockProbe{modern: modern, legacy: lc, policy: pol}, nil
}

// live returns the lock of the upstream as it is now (no date, verdict or configuration).
// It asks the 2026-07-28 face first, as era detection does; an upstream whose discover
// means "2025-11-25 only" is read through initialize.
func (p *lockProbe) live(ctx context.Context) (verify.Lock, error) {
	l := verify.Lock{Bridge: version, Tools: map[string]verify.LockTool{},
		ProtocolVersions: map[string]string{legacy.ProtocolVersion: legacy.ProtocolVersion, sep2663.ProtocolVersion: sep2663.ProtocolVersion}}
	var m fallback.UpstreamManifest
	var call func(json.RawMessage) (json.RawMessage, error)
	d, derr := p.modern.Discover(ctx)
	switch {
	case derr == nil:
		m = fallback.FromDiscover(d)
		call = func(params json.RawMessage) (json.RawMessage, error) {
			return p.modern.Call(ctx, "tools/list", params, sep2663.RequestMeta{}, nil)
		}
	case p.legacy == nil || !fallback.DiscoverMeansLegacy(derr):
		return l, fmt.Errorf("server/discover: %w", derr)
	default:
		sess, err := p.legacy.Connect(ctx)
		if err != nil {
			return l, fmt.Errorf("initialize: %w", err)
		}
		defer sess.Close(context.WithoutCancel(ctx))
		_, raw := sess.InitializeResult()
		if m, err = fallback.FromInitialize(raw); err != nil {
			return l, err
		}
		call = func(params json.RawMessage) (json.RawMessage, error) {
			return sess.Call(ctx, "tools/list", params, legacy.CallOptions{})
		}
	}
	l.ProtocolVersions["upstream"] = m.ProtocolVersion
	l.Upstream = verify.LockUpstream{Name: m.Server.Name, Version: m.Server.Version, ProtocolVersion: m.ProtocolVersion,
		Extensions: append([]string{}, m.Extensions...)}
	client := fallback.LegacyClient(legacy.ProtocolVersion)
	err := eachTool(call, func(raw json.RawMessage) {
		t := fallback.ToolFromJSON(m.Era, raw)
		declared := gjson.GetBytes(raw, "execution.taskSupport").Str
		if declared == "" {
			declared = "unset"
		}
		adv := string(t.Mode)
		if m.Era != fallback.EraLegacy { // the forward route decides what 2025-11-25 clients are told
			adv = string(fallback.TaskSupport(client, m, p.policy.Apply(t)))
		}
		l.Tools[t.Name] = verify.LockTool{TaskSupport: declared, Advertised: adv,
			Annotations: verify.HashAnnotations([]byte(gjson.GetBytes(raw, "annotations").Raw))}
	})
	return l, err
}

// eachTool calls fn with every tool of every tools/list page (at most 100 pages).
func eachTool(call func(json.RawMessage) (json.RawMessage, error), fn func(json.RawMessage)) error {
	cursor := ""
	for range 100 {
		params := json.RawMessage(`{}`)
		if cursor != "" {
			params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		res, err := call(params)
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		gjson.GetBytes(res, "tools").ForEach(func(_, v gjson.Result) bool {
			fn(json.RawMessage(v.Raw))
			return true
		})
		if cursor = gjson.GetBytes(res, "nextCursor").Str; cursor == "" {
			return nil
		}
	}
	return errors.New("tools/list: more than 100 pages")
}

// lockWatch is serve's --lock: it compares the live upstream with the lock file at start
// and on every reload (the file is re-read each time, so writing it again with verify
// --lock and reloading clears the drift). Drift is logged, counted (lock_checks_total,
// lock_drift), shown on /status and, with lock_drift: refuse, set on the work gate, which
// then refuses new task starts on every route.
//
// Concurrency: prepare and its commit run at serve's start and from reloads (one at a
// time); mu guards state, which /status reads.
type lockWatch struct {
	probe   *lockProbe
	gate    *bridge.Gate
	metrics *metrics.Metrics
	log     zerolog.Logger
	timeout time.Duration

	mu         sync.Mutex
	state      *ops.LockStatus // nil: no lock configured
	path, mode string          // the lock and lock_drift in force (reprobed)
	checking   sync.Mutex      // one comparison at a time (start, reload, re-probe)
}

// prepare reads the lock at path and compares the live upstream with it, and returns the
// commit that puts the result in force (reload's Prepare/commit). A lock that cannot be
// read is an error (a reload then changes nothing); an upstream that does not answer is
// not: the last comparison stays in force and the failure is counted and shown.
func (w *lockWatch) prepare(ctx context.Context, path, mode string) (func(), error) {
	if path == "" {
		return func() { w.set(nil, nil) }, nil
	}
	w.checking.Lock()
	defer w.checking.Unlock()
	if mode == "" {
		mode = "warn"
	}
	locked, err := verify.ReadLock(path)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	live, err := w.probe.live(ctx)
	now := time.Now().UTC()
	st := &ops.LockStatus{File: path, Mode: mode, Verified: locked.Date, Verdict: locked.Verdict, CheckedAt: now}
	if err != nil {
		st.Error = "the upstream could not be compared with the lock: " + err.Error()
		return func() {
			w.metrics.LockChecked("failed", 0)
			w.log.Warn().Str("lock", path).Err(err).Msg("lock: the upstream could not be compared with the lock; the last comparison stays in force")
			var keep *jsonrpc.Error
			if prev := w.status(); prev != nil && prev.File == path {
				st.Drift, st.Refusing = prev.Drift, len(prev.Drift) > 0 && mode == "refuse"
				if st.Refusing {
					keep = bridge.LockDriftError(path, st.Drift)
				}
			}
			w.set(st, keep)
		}, nil
	}
	drift := verify.Compare(locked, live)
	st.Drift = make([]string, len(drift))
	for i, d := range drift {
		st.Drift[i] = d.String()
	}
	st.Refusing = len(drift) > 0 && mode == "refuse"
	return func() { w.commit(st, locked) }, nil
}

// commit puts one comparison in force: the log, the metrics, the gate, /status.
func (w *lockWatch) commit(st *ops.LockStatus, locked verify.Lock) {
	result := "match"
	if len(st.Drift) > 0 {
		result = "drift"
	}
	w.metrics.LockChecked(result, len(st.Drift))
	var refusal *jsonrpc.Error
	switch {
	case len(st.Drift) == 0:
		w.log.Info().Str("lock", st.File).Str("verified", locked.Date).Str("verdict", locked.Verdict).
			Msg("lock: the upstream matches the verified lock")
	default:
		ev := w.log.Warn()
		if st.Refusing {
			ev = w.log.Error()
		}
		ev.Str("lock", st.File).Str("verified", locked.Date).Strs("changed", st.Drift).Str("lockDrift", st.Mode).
			Msg("lock: the upstream differs from the verified lock; run taskbridge verify --lock again, then reload")
	}
	if locked.Verdict != "pass" {
		w.log.Warn().Str("lock", st.File).Str("verdict", locked.Verdict).Msg("lock: the lock records a failed verification")
	}
	if st.Refusing {
		refusal = bridge.LockDriftError(st.File, st.Drift)
	}
	w.set(st, refusal)
}

// set replaces the state shown on /status and the gate's refusal (nil: none).
func (w *lockWatch) set(st *ops.LockStatus, refusal *jsonrpc.Error) {
	w.mu.Lock()
	w.state = st
	w.path, w.mode = "", ""
	if st != nil {
		w.path, w.mode = st.File, st.Mode
	}
	w.mu.Unlock()
	w.gate.SetDrift(refusal)
}

// status is /status's view of the lock (nil: none configured).
func (w *lockWatch) status() *ops.LockStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state == nil {
		return nil
	}
	c := *w.state
	return &c
}

// lockedFacts is the lock verify --lock writes: the live facts read before the run, dated
// and stamped with the run's verdict and the configuration hash.
func lockedFacts(live verify.Lock, rep *verify.Report, cfg *config.Config) verify.Lock {
	live.Configuration = configHash(cfg)
	live.Stamp(rep, time.Now())
	return live
}

// startLockWatch is serve's --lock at start: the first comparison is made before the
// bridge takes traffic, so with lock_drift: refuse no task starts on a drifted upstream.
// A lock file that cannot be read stops serve (a clear error); without a lock it only
// waits for a reload that sets one.
func startLockWatch(ctx context.Context, cfg *config.Config, ups upstreams, m *metrics.Metrics, gate *bridge.Gate, log zerolog.Logger) (*lockWatch, error) {
	probe, err := newLockProbe(ups.modern, ups.legacy, cfg)
	if err != nil {
		return nil, err
	}
	w := &lockWatch{probe: probe, gate: gate, metrics: m, log: log, timeout: max(cfg.StatusTimeout, 5*time.Second),
		path: cfg.Lock, mode: cfg.LockDrift}
	commit, err := w.prepare(ctx, cfg.Lock, cfg.LockDrift)
	if err != nil {
		return nil, err
	}
	commit()
	return w, nil
}

// reprobed compares the upstream with the lock in force again after the era router
// re-probed it (discover's ttlMs ran out, a reload, answers that stopped matching): an
// upstream that changed under a running bridge is drift too. A lock that cannot be read
// now is logged and changes nothing. Safe on a nil lockWatch (before serve set it).
func (w *lockWatch) reprobed(reason string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	path, mode := w.path, w.mode
	w.mu.Unlock()
	if path == "" || reason == "start" {
		return
	}
	commit, err := w.prepare(context.Background(), path, mode)
	if err != nil {
		w.log.Warn().Err(err).Msg("lock: not compared after the re-probe")
		return
	}
	commit()
}

// applier re-reads the lock file on every reload (SIGHUP, POST /admin/reload), changed
// settings or not: writing the lock again with verify --lock and reloading clears a drift.
func (w *lockWatch) applier() reload.Applier {
	return reload.Applier{Area: "lock", Keys: []string{"lock", "lock_drift"}, Always: true,
		Prepare: func(next *config.Config) (func(), error) {
			return w.prepare(context.Background(), next.Lock, next.LockDrift)
		}}
}

// lockedVerdict is the verdict a lock records for rep: pass or fail.
func lockedVerdict(rep *verify.Report) string {
	if len(rep.Failed()) > 0 {
		return "fail"
	}
	return "pass"
}
