package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/taskbridge/taskbridge/internal/config"
	"github.com/taskbridge/taskbridge/internal/redact"
)

const configUsage = `Usage: taskbridge config check FILE [--connect]

Validates FILE with the TASKBRIDGE_* environment applied (what serve would see) and prints the
effective configuration, secrets masked, each value commented with its source. Warns about
misspelled TASKBRIDGE_* variables and about settings that have no effect on the route the
upstream takes. Exit status 1 on any problem.

  --connect   also open the store read-only (it must exist and hold the taskbridge schema; nothing
              is created or migrated) and ask the upstream its protocol era, so the route
              warnings are exact instead of conditional
`

// cmdConfig: "taskbridge config check FILE" (see configUsage).
func cmdConfig(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stdout, configUsage)
		return nil
	}
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprint(stderr, configUsage)
		return errors.New("config: want the subcommand check")
	}
	fs := flag.NewFlagSet("config check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	connect := fs.Bool("connect", false, "also open the store read-only and ask the upstream its era")
	c := command{name: "config check", synopsis: "config check FILE [--connect]", maxArgs: 1}
	pos, err := parseArgs(fs, c, args[1:], io.Discard)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, configUsage)
		return err
	}
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fmt.Fprint(stderr, configUsage)
		return errors.New("config check: want exactly one FILE")
	}
	path := pos[0]
	warnUnknownEnv(stderr, os.Environ())
	cfg, err := config.LoadFile(path, os.Getenv)
	if err == nil {
		err = cfg.Validate(true)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: invalid configuration:\n%v\n", path, err)
		return fmt.Errorf("config check: %s is not valid", path)
	}
	era := eraUnknown
	if *connect {
		if era, err = checkConnections(ctx, cfg, stdout); err != nil {
			return fmt.Errorf("config check: %w", err)
		}
	}
	for _, w := range routeWarnings(cfg, era) {
		fmt.Fprintln(stderr, "warning:", w)
	}
	fmt.Fprintf(stdout, "# %s: ok — effective configuration (secrets masked; each value commented with its source)\n", path)
	return cfg.Print(stdout)
}

// checkConnections opens the store read-only and detects the upstream's era; a store that
// is missing or not migrated, or an upstream that does not answer, is an error.
func checkConnections(ctx context.Context, cfg *config.Config, stdout io.Writer) (upstreamEra, error) {
	st, err := openStoreAs(ctx, cfg.Store, storeReadOnly)
	if err != nil {
		return eraUnknown, err
	}
	sum, err := st.Summary(ctx)
	st.Close()
	if err != nil {
		return eraUnknown, fmt.Errorf("store %s: %w", config.MaskDSN(cfg.Store), err)
	}
	fmt.Fprintf(stdout, "# store %s: ok, read-only (%d sessions, %d tasks)\n", config.MaskDSN(cfg.Store), sum.Sessions, sum.Tasks)
	if cfg.UpstreamCmd != "" {
		fmt.Fprintln(stdout, "# upstream: a child process (upstream_cmd): not started by config check; the forward route is assumed")
		return eraModern, nil
	}
	tl, err := loadTLS(cfg) // the upstream's CA and client certificate, as serve uses them
	if err != nil {
		return eraUnknown, err
	}
	hc, h := upstreamHTTP(cfg, nil, tl)
	ups, err := openUpstreams(upstreamFlags{url: cfg.Upstream}, hc, h, &upstreamHooks{}, newLogger(io.Discard, "error"), io.Discard)
	if err != nil {
		return eraUnknown, err
	}
	era, routes, err := detectEra(ctx, ups, 10*time.Second)
	if err != nil {
		return era, fmt.Errorf("upstream %s: %w", redact.URL(cfg.Upstream), err)
	}
	fmt.Fprintf(stdout, "# upstream: 2025-11-25 clients get the %s route (%s), 2026-07-28 clients the %s route (%s)\n",
		routeOf(routes.Legacy, true), routes.Legacy.Reason, routeOf(routes.Modern, false), routes.Modern.Reason)
	return era, nil
}

// ineffective lists, per route, the settings that route does not apply, and why. Keep it
// true to serve.go: when a route starts applying a setting, its entry goes.
var ineffective = map[upstreamEra][]struct{ key, why string }{
	eraLegacy: {
		{"max_ttl", "the ttl is the upstream's own on this route"},
		{"heartbeat", "there is no sync collapse on this route"},
		{"list_page_size", "tasks/list is the upstream's own on this route"},
		{"host_allow", "bridge-hosted tasks exist on the forward route only"},
		{"host_deny", "bridge-hosted tasks exist on the forward route only"},
		{"no_hosting", "bridge-hosted tasks exist on the forward route only"},
		{"host_workers", "bridge-hosted tasks exist on the forward route only"},
		{"tool_task_support", "tools/list comes from the 2025-11-25 upstream unchanged on this route"},
		{"poll_fault_budget", "the budget of invalid tasks/get replies is the forward route's"},
	},
}

// routeWarnings names every setting given (not a default) that has no effect on the route
// of era; with the era unknown (no --connect, HTTP upstream), it says on which route.
func routeWarnings(cfg *config.Config, era upstreamEra) []string {
	var out []string
	eras := []upstreamEra{era}
	if era == eraUnknown && cfg.UpstreamCmd == "" {
		eras = []upstreamEra{eraLegacy}
	}
	for _, e := range eras {
		for _, in := range ineffective[e] {
			src, set := cfg.Sources[in.key]
			if !set {
				continue
			}
			if era == eraUnknown {
				out = append(out, fmt.Sprintf("%s: %s has no effect if the upstream speaks MCP 2025-11-25: %s (config check --connect tells)", src, in.key, in.why))
			} else {
				out = append(out, fmt.Sprintf("%s: %s has no effect in front of this MCP 2025-11-25 upstream: %s", src, in.key, in.why))
			}
		}
	}
	return out
}
