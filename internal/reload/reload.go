// Package reload re-reads taskbridge's configuration in a running process (SIGHUP, or
// POST /admin/reload on the admin listener) and applies what may change live.
//
// The configuration is loaded as at start (the file, the TASKBRIDGE_* environment and the
// original command-line flags) and validated; the keys whose values differ from the
// running process are then handed to the appliers that own them. Each area of the bridge
// that can change live (logging, the kill switch, the sunset, limits, API keys, hosting
// policy) registers one Applier for its keys. A key no applier owns cannot change live:
// the reload reports it as "needs restart" and leaves it as it is.
//
// A reload is all or nothing: every concerned applier first prepares (validates and builds
// its new state without touching the running one), and only when all have prepared are
// their commits run, which cannot fail. An invalid file therefore changes nothing, and the
// result says why.
//
// Concurrency: Reload and Register are safe for concurrent use; reloads run one at a time.
package reload

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/internal/config"
)

// Applier applies one area's live settings.
type Applier struct {
	// Area names it in results and logs: "logging", "kill switch", …
	Area string
	// Keys are the configuration keys it applies live.
	Keys []string
	// Prepare checks next and builds the new state for Keys without changing the running
	// one, and returns the commit that swaps it in. Commit must not fail. Prepare is only
	// called when one of Keys changed.
	Prepare func(next *config.Config) (commit func(), err error)
	// Always: Prepare is called on every reload, whether Keys changed or not (a setting that
	// names a file whose content may have changed since: the lock file). It is listed in
	// Applied only when one of Keys changed.
	Always bool
}

// Result is what one reload did.
type Result struct {
	OK     bool   `json:"ok"`
	Source string `json:"source"` // "SIGHUP", "POST /admin/reload"
	// Changed are the keys applied live, with old and new values (secrets masked).
	Changed []config.Change `json:"changed"`
	// Applied names the areas that took the changes.
	Applied []string `json:"applied"`
	// NeedsRestart are the keys whose new values differ from the running process but
	// cannot change live; they keep their running values until a restart.
	NeedsRestart []config.Change `json:"needsRestart"`
	// Error says why nothing changed when OK is false.
	Error string `json:"error,omitempty"`
}

// Reloader runs reloads. mu serializes them and guards running and appliers.
type Reloader struct {
	load func() (*config.Config, error)
	log  zerolog.Logger

	mu       sync.Mutex
	boot     *config.Config // the configuration the process started with
	running  *config.Config // boot, as changed by the reloads so far
	appliers []Applier
}

// New returns a Reloader for a process started with boot. load must re-read and validate
// the configuration exactly as at start.
func New(boot *config.Config, load func() (*config.Config, error), log zerolog.Logger) *Reloader {
	return &Reloader{load: load, log: log, boot: boot, running: boot}
}

// Register adds an applier. A key owned by two appliers is a programming error.
func (r *Reloader) Register(a Applier) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range a.Keys {
		if !slices.Contains(config.Keys(), k) {
			return fmt.Errorf("reload: applier %q: unknown key %q", a.Area, k)
		}
		if o := r.owner(k); o != nil {
			return fmt.Errorf("reload: key %q is owned by %q and %q", k, o.Area, a.Area)
		}
	}
	r.appliers = append(r.appliers, a)
	return nil
}

// LiveKeys returns the keys some applier takes live, sorted.
func (r *Reloader) LiveKeys() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ks []string
	for _, a := range r.appliers {
		ks = append(ks, a.Keys...)
	}
	slices.Sort(ks)
	return ks
}

// owner returns the applier of key, nil when none. r.mu is held.
func (r *Reloader) owner(key string) *Applier {
	for i := range r.appliers {
		if slices.Contains(r.appliers[i].Keys, key) {
			return &r.appliers[i]
		}
	}
	return nil
}

// Reload re-reads the configuration and applies it (see the package comment). The result
// is also logged: at info, whatever the log level, when applied; at error when refused.
func (r *Reloader) Reload(_ context.Context, source string) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.reload(source)
	r.logResult(res)
	return res
}

func (r *Reloader) reload(source string) Result {
	res := Result{Source: source, Changed: []config.Change{}, Applied: []string{}, NeedsRestart: []config.Change{}}
	next, err := r.load()
	if err == nil && next == nil {
		err = errors.New("no configuration loaded")
	}
	if err != nil {
		res.Error = "configuration invalid, nothing changed: " + err.Error()
		return res
	}
	var touched []*Applier
	for _, c := range config.Diff(r.running, next) {
		if a := r.owner(c.Key); a != nil {
			res.Changed = append(res.Changed, c)
			if !slices.Contains(touched, a) {
				touched = append(touched, a)
			}
		}
	}
	for _, c := range config.Diff(r.boot, next) {
		if r.owner(c.Key) == nil {
			res.NeedsRestart = append(res.NeedsRestart, c)
		}
	}
	changed := len(touched)
	for i := range r.appliers {
		if a := &r.appliers[i]; a.Always && !slices.Contains(touched, a) {
			touched = append(touched, a)
		}
	}
	commits := make([]func(), 0, len(touched))
	for i, a := range touched {
		commit, err := a.Prepare(next)
		if err != nil {
			res.Changed = []config.Change{}
			res.Applied = []string{}
			res.Error = fmt.Sprintf("%s: %v; nothing changed", a.Area, err)
			return res
		}
		commits = append(commits, commit)
		if i < changed {
			res.Applied = append(res.Applied, a.Area)
		}
	}
	for _, commit := range commits {
		commit()
	}
	r.running = next
	res.OK = true
	return res
}

func (r *Reloader) logResult(res Result) {
	strs := func(cs []config.Change) []string {
		out := make([]string, 0, len(cs))
		for _, c := range cs {
			out = append(out, c.String())
		}
		return out
	}
	if !res.OK {
		r.log.Error().Str("source", res.Source).Str("reason", res.Error).Msg("configuration reload refused")
		return
	}
	// Written whatever the level (the reload may just have raised it), labelled info.
	ev := r.log.Log().Str("level", "info").Str("source", res.Source).Strs("changed", strs(res.Changed)).Strs("applied", res.Applied)
	if len(res.NeedsRestart) > 0 {
		ev = ev.Strs("needsRestart", strs(res.NeedsRestart))
	}
	ev.Msg("configuration reloaded")
}
