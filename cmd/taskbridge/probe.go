package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/fallback"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/redact"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
)

// probeReport is what "taskbridge probe" prints (--json: exactly this, indented).
type probeReport struct {
	URL       string                    `json:"url"`
	Manifest  fallback.UpstreamManifest `json:"manifest"`
	Decisions []toolDecisions           `json:"decisions"`
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
		about: "Prints the upstream's capability manifest (era, versions, extensions, tools) and the route the bridge\n" +
			"would take per tool for a 2025-11-25 and a 2026-07-28 client. It needs no store.", maxArgs: 1}
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
	m, err := probeUpstream(ctx, url, headers.h)
	if err != nil {
		return err
	}
	rep := buildReport(redact.URL(url), m, fallback.Policy{HostAllow: splitList(*allow), HostDeny: splitList(*deny), NoHosting: *noHosting})
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

// probeUpstream detects the era as 2026-07-28 prescribes (server/discover first; a
// non-modern error means a legacy server, then initialize) and lists the tools.
func probeUpstream(ctx context.Context, url string, h http.Header) (fallback.UpstreamManifest, error) {
	shown := redact.URL(url) // what errors may name
	mc := sep2663.NewClient(sep2663.ClientOptions{URL: url, Header: h, ClientInfo: sep2663.Implementation{Name: "taskbridge-probe", Version: version}})
	d, derr := mc.Discover(ctx)
	if derr == nil {
		m := fallback.FromDiscover(d)
		err := listTools(ctx, &m, func(params json.RawMessage) (json.RawMessage, error) {
			return mc.Call(ctx, "tools/list", params, sep2663.RequestMeta{}, nil)
		})
		return m, err
	}
	if !fallback.DiscoverMeansLegacy(derr) {
		var je *jsonrpc.Error
		if errors.As(derr, &je) {
			return fallback.UpstreamManifest{}, fmt.Errorf("%s speaks MCP 2026-07-28 but refused server/discover: %d %s", shown, je.Code, je.Message)
		}
		return fallback.UpstreamManifest{}, fmt.Errorf("%s does not speak MCP: server/discover: %v", shown, derr)
	}
	lc := legacy.NewClient(legacy.ClientOptions{URL: url, Header: h, Capabilities: json.RawMessage(`{}`),
		ClientInfo: legacy.Implementation{Name: "taskbridge-probe", Version: version}})
	sess, err := lc.Connect(ctx)
	if err != nil {
		return fallback.UpstreamManifest{}, fmt.Errorf("%s does not speak MCP: server/discover: %v; initialize: %v", shown, derr, err)
	}
	defer sess.Close(context.WithoutCancel(ctx))
	_, raw := sess.InitializeResult()
	m, err := fallback.FromInitialize(raw)
	if err != nil {
		return m, err
	}
	return m, listTools(ctx, &m, func(params json.RawMessage) (json.RawMessage, error) {
		return sess.Call(ctx, "tools/list", params, legacy.CallOptions{})
	})
}

// listTools reads every tools/list page into m.Tools (at most 100 pages).
func listTools(ctx context.Context, m *fallback.UpstreamManifest, call func(json.RawMessage) (json.RawMessage, error)) error {
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
		m.Tools = append(m.Tools, fallback.ToolsFromList(m.Era, res)...)
		if cursor = gjson.GetBytes(res, "nextCursor").Str; cursor == "" {
			return nil
		}
	}
	return errors.New("tools/list: more than 100 pages")
}

// buildReport computes, per tool, what the bridge would do for each client era.
func buildReport(url string, m fallback.UpstreamManifest, p fallback.Policy) probeReport {
	rep := probeReport{URL: url, Manifest: m, Decisions: []toolDecisions{}}
	legacyClient := fallback.LegacyClient(legacy.ProtocolVersion)
	modern := func(tasks bool) fallback.ClientManifest {
		return fallback.ClientManifest{Era: fallback.EraModern, Version: sep2663.ProtocolVersion, Tasks: tasks}
	}
	for _, t := range m.Tools {
		ti := p.Apply(t)
		rep.Decisions = append(rep.Decisions, toolDecisions{
			Tool: t.Name,
			Legacy: clientDecisions{
				TaskSupport: string(fallback.TaskSupport(legacyClient, m, ti)),
				Task:        asJSON(fallback.Decide(legacyClient, m, ti, fallback.Request{Task: true})),
				Sync:        asJSON(fallback.Decide(legacyClient, m, ti, fallback.Request{})),
			},
			Modern: clientDecisions{
				Task: asJSON(fallback.Decide(modern(true), m, ti, fallback.Request{Task: true})),
				Sync: asJSON(fallback.Decide(modern(false), m, ti, fallback.Request{})),
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
	fmt.Fprintf(w, "tools           %d\n\n", len(m.Tools))
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
