package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/fallback"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/redact"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
)

// probeReport is what "taskbridge probe" prints (--json: exactly this, indented).
type probeReport struct {
	URL string `json:"url"`
	// Manifest is the face 2025-11-25 clients are served by (the upstream's only face when
	// it has one); Faces has both, Routes the face and route of each client era.
	Manifest  fallback.UpstreamManifest `json:"manifest"`
	Faces     fallback.Shape            `json:"faces"`
	Routes    eraRoutes                 `json:"routes"`
	Decisions []toolDecisions           `json:"decisions"`
}

// eraRoutes are the route of each client era.
type eraRoutes struct {
	Legacy eraRoute `json:"client-2025-11-25"`
	Modern eraRoute `json:"client-2026-07-28"`
}

type eraRoute struct {
	Face   fallback.Era `json:"face"`
	Route  string       `json:"route"`
	Reason string       `json:"reason"`
}

// toolDecisions are the routes of one tool for each client era.
type toolDecisions struct {
	Tool   string          `json:"tool"`
	Legacy clientDecisions `json:"client-2025-11-25"`
	Modern clientDecisions `json:"client-2026-07-28"`
}

// clientDecisions: Task is a call with params.task (legacy) or with the tasks extension
// declared (2026-07-28); Sync is a call without.
type clientDecisions struct {
	TaskSupport string       `json:"taskSupport,omitempty"` // advertised in tools/list (legacy)
	Task        decisionJSON `json:"task"`
	Sync        decisionJSON `json:"sync"`
}

type decisionJSON struct {
	Decision string         `json:"decision"`
	Reason   string         `json:"reason"`
	Error    *jsonrpc.Error `json:"error,omitempty"`
}

func cmdProbe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := command{name: "probe", synopsis: "probe URL [--header 'NAME: VALUE']… [--json | --wide] [--timeout 10s] [--host-allow a,b] [--host-deny a,b] [--no-hosting]",
		about: "Prints both faces of the upstream (server/discover and 2025-11-25 initialize: era, versions, extensions,\n" +
			"tasks, tools), the route per client era, and the route the bridge would take per tool for a 2025-11-25\n" +
			"and a 2026-07-28 client. It needs no store.", maxArgs: 1}
	asJSON := fs.Bool("json", false, "print the report as JSON")
	wide := fs.Bool("wide", false, "the table with every column (hints, advertised taskSupport, the reason of each decision)")
	timeout := fs.Duration("timeout", 10*time.Second, "bound on the whole probe")
	allow := fs.String("host-allow", "", "comma-separated tools that may run as bridge-hosted tasks whatever their annotations")
	deny := fs.String("host-deny", "", "comma-separated tools never run as bridge-hosted tasks")
	noHosting := fs.Bool("no-hosting", false, "refuse every bridge-hosted task")
	var headers headerFlag
	fs.Var(&headers, "header", "a header `'NAME: VALUE'` sent with every request to the upstream, e.g. 'Authorization: Bearer …' (repeatable)")
	pos, err := parseArgs(fs, c, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		fmt.Fprintf(stderr, "Usage: taskbridge %s\n", c.synopsis)
		return errors.New("probe: URL is required")
	}
	url := pos[0]
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	shape, routes, err := probeUpstream(ctx, url, headers.h)
	if err != nil {
		return err
	}
	rep := buildReport(redact.URL(url), shape, routes, fallback.Policy{HostAllow: splitList(*allow), HostDeny: splitList(*deny), NoHosting: *noHosting})
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(rep)
	}
	printReport(stdout, rep, *wide)
	return nil
}

// headerFlag collects repeated --header 'NAME: VALUE' flags.
type headerFlag struct{ h http.Header }

func (f *headerFlag) String() string { return "" }

func (f *headerFlag) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t") {
		return fmt.Errorf("want 'NAME: VALUE', got %q", v)
	}
	if f.h == nil {
		f.h = http.Header{}
	}
	f.h.Add(name, strings.TrimSpace(value))
	return nil
}

// probeUpstream reads both faces of the upstream as the bridge does (bridge.Probe:
// server/discover, then a 2025-11-25 initialize when it may find something) and picks the
// face each client era is served by (fallback.ChooseRoutes).
func probeUpstream(ctx context.Context, url string, h http.Header) (fallback.Shape, fallback.Routes, error) {
	shown := redact.URL(url) // what errors may name
	mc := sep2663.NewClient(sep2663.ClientOptions{URL: url, Header: h, ClientInfo: sep2663.Implementation{Name: "taskbridge-probe", Version: version}})
	lc := legacy.NewClient(legacy.ClientOptions{URL: url, Header: h, Capabilities: json.RawMessage(`{}`),
		ClientInfo: legacy.Implementation{Name: "taskbridge-probe", Version: version}})
	shape, err := bridge.Probe(ctx, bridge.ProbeClients{Modern: mc, Legacy: lc})
	if err != nil {
		return shape, fallback.Routes{}, fmt.Errorf("%s does not speak MCP: %w", shown, err)
	}
	routes, err := fallback.ChooseRoutes(shape)
	if err != nil {
		return shape, routes, fmt.Errorf("%s does not speak MCP: %w", shown, err)
	}
	return shape, routes, nil
}

// buildReport computes, per tool, what the bridge would do for each client era, each
// against the face that client era is served by.
func buildReport(url string, shape fallback.Shape, routes fallback.Routes, p fallback.Policy) probeReport {
	lm, mm := *shape.Face(routes.Legacy.Face), *shape.Face(routes.Modern.Face)
	rep := probeReport{URL: url, Manifest: lm, Faces: shape, Decisions: []toolDecisions{},
		Routes: eraRoutes{
			Legacy: eraRoute{Face: routes.Legacy.Face, Route: string(routeOf(routes.Legacy, true)), Reason: routes.Legacy.Reason},
			Modern: eraRoute{Face: routes.Modern.Face, Route: string(routeOf(routes.Modern, false)), Reason: routes.Modern.Reason},
		}}
	legacyClient := fallback.LegacyClient(legacy.ProtocolVersion)
	modern := func(tasks bool) fallback.ClientManifest {
		return fallback.ClientManifest{Era: fallback.EraModern, Version: sep2663.ProtocolVersion, Tasks: tasks}
	}
	for _, t := range lm.Tools {
		ti := p.Apply(t)
		mt := ti
		if i := slices.IndexFunc(mm.Tools, func(x fallback.Tool) bool { return x.Name == t.Name }); i >= 0 {
			mt = p.Apply(mm.Tools[i])
		}
		rep.Decisions = append(rep.Decisions, toolDecisions{
			Tool: t.Name,
			Legacy: clientDecisions{
				TaskSupport: string(fallback.TaskSupport(legacyClient, lm, ti)),
				Task:        asJSON(fallback.Decide(legacyClient, lm, ti, fallback.Request{Task: true})),
				Sync:        asJSON(fallback.Decide(legacyClient, lm, ti, fallback.Request{})),
			},
			Modern: clientDecisions{
				Task: asJSON(fallback.Decide(modern(true), mm, mt, fallback.Request{Task: true})),
				Sync: asJSON(fallback.Decide(modern(false), mm, mt, fallback.Request{})),
			},
		})
	}
	return rep
}

func asJSON(d fallback.Decision) decisionJSON {
	return decisionJSON{Decision: string(d.Kind), Reason: d.Reason, Error: d.Err}
}

// printReport writes the human form: a compact table by default (tool, mode, and the
// decision per client era), every column with wide. Names from the upstream are made
// terminal-safe.
func printReport(w io.Writer, r probeReport, wide bool) {
	m := r.Manifest
	fmt.Fprintf(w, "upstream        %s\n", r.URL)
	fmt.Fprintf(w, "era             %s (protocol %s; supports %s)\n", m.Era, termSafe(m.ProtocolVersion), termSafe(strings.Join(m.SupportedVersions, ", ")))
	fmt.Fprintf(w, "server          %s %s\n", termSafe(m.Server.Name), termSafe(m.Server.Version))
	fmt.Fprintf(w, "extensions      %s\n", orNone(termSafe(strings.Join(m.Extensions, ", "))))
	fmt.Fprintf(w, "tasks           %v (operations: %s)\n", m.Tasks, orNone(termSafe(strings.Join(m.TaskOperations, ", "))))
	fmt.Fprintf(w, "tools           %d\n", len(m.Tools))
	fmt.Fprintf(w, "faces           %s\n", faceLine(r.Faces))
	fmt.Fprintf(w, "2025-11-25      %s route to the %s face (%s)\n", r.Routes.Legacy.Route, r.Routes.Legacy.Face, r.Routes.Legacy.Reason)
	fmt.Fprintf(w, "2026-07-28      %s route to the %s face (%s)\n\n", r.Routes.Modern.Route, r.Routes.Modern.Face, r.Routes.Modern.Reason)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if wide {
		fmt.Fprintln(tw, "TOOL\tMODE\tHINTS\t2025-11-25 ADVERTISED\t2025-11-25 TASK\t2025-11-25 SYNC\t2026-07-28 TASK\t2026-07-28 SYNC")
	} else {
		fmt.Fprintln(tw, "TOOL\tMODE\t2025-11-25 TASK\t2025-11-25 SYNC\t2026-07-28 TASK\t2026-07-28 SYNC")
	}
	for i, d := range r.Decisions {
		t := m.Tools[i]
		if wide {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", termSafe(d.Tool), t.Mode, hints(t), d.Legacy.TaskSupport,
				short(d.Legacy.Task), short(d.Legacy.Sync), short(d.Modern.Task), short(d.Modern.Sync))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", termSafe(d.Tool), t.Mode,
			compact(d.Legacy.Task), compact(d.Legacy.Sync), compact(d.Modern.Task), compact(d.Modern.Sync))
	}
	tw.Flush()
	if !wide && len(r.Decisions) > 0 {
		fmt.Fprintln(w, "\n(--wide adds the annotations, the advertised taskSupport and the reason of each decision; --json all of it)")
	}
}

// faceLine names each face found and whether it has tasks.
func faceLine(s fallback.Shape) string {
	var parts []string
	for _, m := range []*fallback.UpstreamManifest{s.Modern, s.Legacy} {
		if m != nil {
			parts = append(parts, fmt.Sprintf("%s (protocol %s, tasks %v)", m.Era, termSafe(m.ProtocolVersion), m.Tasks))
		}
	}
	return strings.Join(parts, "; ")
}

// compact is a decision without its reason; a refusal keeps its error code.
func compact(d decisionJSON) string {
	if d.Error != nil {
		return fmt.Sprintf("%s (%d)", d.Decision, d.Error.Code)
	}
	return d.Decision
}

func short(d decisionJSON) string {
	if d.Error != nil {
		return fmt.Sprintf("%s (%d %s)", d.Decision, d.Error.Code, d.Reason)
	}
	return d.Decision + " (" + d.Reason + ")"
}

func hints(t fallback.Tool) string {
	var h []string
	if t.ReadOnly {
		h = append(h, "readOnly")
	}
	if t.Idempotent {
		h = append(h, "idempotent")
	}
	if t.Destructive {
		h = append(h, "destructive")
	}
	return orNone(strings.Join(h, ","))
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// parseToolTaskSupport reads tool_task_support entries (name=forbidden|optional|required).
func parseToolTaskSupport(entries []string) (map[string]string, error) {
	var out map[string]string
	for _, kv := range entries {
		name, mode, ok := strings.Cut(kv, "=")
		if !ok || fallback.ParseMode(mode) == fallback.ModeUnknown {
			return nil, fmt.Errorf("tool_task_support %q: want name=forbidden|optional|required", kv)
		}
		if out == nil {
			out = map[string]string{}
		}
		out[strings.TrimSpace(name)] = mode
	}
	return out, nil
}
