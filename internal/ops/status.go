package ops

import (
	"encoding/json"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/taskbridge/taskbridge/internal/redact"
)

// statusData is what the /status page and /status.json show.
type statusData struct {
	Report     *Report            `json:"report"`
	Version    string             `json:"version"`
	Upstream   string             `json:"upstream"`
	Draining   bool               `json:"draining"`
	KillSwitch bool               `json:"killSwitch"`
	SunsetSoon bool               `json:"sunsetSoon"`
	SunsetPast bool               `json:"sunsetPast"`
	DaysPast   int                `json:"daysPast,omitempty"` // whole days since the sunset
	Checks     []Check            `json:"checks"`
	Decisions  map[string]float64 `json:"routeDecisions"` // this replica, since start
	Replica    replicaData        `json:"replica"`
	Lock       *LockStatus        `json:"lock,omitempty"` // serve --lock; absent without one
	Error      string             `json:"error,omitempty"`
}

type replicaData struct {
	InflightRequests int64 `json:"inflightRequests"`
	TrackedTasks     int   `json:"trackedTasks"`
}

func (s *server) data(r *http.Request) statusData {
	now := s.o.Now()
	killSwitch, sunset := s.o.KillSwitch, s.o.Sunset
	if s.o.Policy != nil {
		killSwitch, sunset = s.o.Policy() // what a reload made of them
	}
	d := statusData{Version: s.o.Version, Upstream: redact.URL(s.o.Upstream), Draining: s.o.Drain.Draining(),
		KillSwitch: killSwitch, Checks: s.checks(r.Context()),
		Decisions: s.o.Metrics.Values("fallback_decisions_total"),
		Replica:   replicaData{InflightRequests: s.o.Inflight.Count()}}
	if s.o.ActiveTasks != nil {
		d.Replica.TrackedTasks = s.o.ActiveTasks()
	}
	if s.o.Lock != nil {
		d.Lock = s.o.Lock()
	}
	if !sunset.IsZero() {
		d.SunsetPast = !now.Before(sunset)
		if d.SunsetPast {
			d.DaysPast = int(now.Sub(sunset) / (24 * time.Hour))
		}
		d.SunsetSoon = !d.SunsetPast && sunset.Sub(now) <= s.o.SunsetWarn
	}
	rep, err := BuildReport(r.Context(), s.o.Store, now, s.o.ReportWindow, sunset)
	if err != nil {
		s.o.Logger.Warn().Err(err).Msg("status: report failed")
		d.Error = "the store did not answer; the report is unavailable"
		rep = &Report{Generated: now.UTC(), InFlight: map[string]int{}}
	}
	d.Report = rep
	return d
}

func (s *server) status(w http.ResponseWriter, r *http.Request) {
	d := s.data(r)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	if d.Error != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	if err := statusTmpl.Execute(w, d); err != nil {
		s.o.Logger.Warn().Err(err).Msg("status: render failed")
	}
}

func (s *server) statusJSON(w http.ResponseWriter, r *http.Request) {
	d := s.data(r)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if d.Error != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(d)
}

var funcs = template.FuncMap{
	"ago": func(now, t time.Time) string {
		d := now.Sub(t)
		switch {
		case d < time.Minute:
			return "just now"
		case d < time.Hour:
			return plural(int(d/time.Minute), "minute") + " ago"
		case d < 48*time.Hour:
			return plural(int(d/time.Hour), "hour") + " ago"
		}
		return plural(int(d/(24*time.Hour)), "day") + " ago"
	},
	// ts is a time as the page shows it, in a <time> the CSS keeps on one line.
	"ts": func(t time.Time) template.HTML {
		return template.HTML(`<time datetime="` + t.UTC().Format(time.RFC3339) + `">` + t.UTC().Format("2006-01-02 15:04") + ` UTC</time>`) //nolint:gosec // formatted time only
	},
	// tsu is ts without the zone, for columns headed (UTC).
	"tsu": func(t time.Time) template.HTML {
		return template.HTML(`<time datetime="` + t.UTC().Format(time.RFC3339) + `">` + t.UTC().Format("2006-01-02 15:04") + `</time>`) //nolint:gosec // formatted time only
	},
	"today": func(r *Report) *DayRow {
		if len(r.Days) == 0 {
			return nil
		}
		return &r.Days[len(r.Days)-1]
	},
	"plural": plural,
	"chart":  func(r *Report) template.HTML { return legacyChart(r.Days, r.Sunset) },
	"day":    func(t time.Time) string { return t.UTC().Format(time.DateOnly) },
	"modes": func(m map[string]int) string {
		var parts []string
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range m {
				if !yield(k) {
					return
				}
			}
		}) {
			parts = append(parts, k+" "+itoa(m[k]))
		}
		return strings.Join(parts, " · ")
	},
	"decisions": func(m map[string]float64) []struct {
		Name  string
		Count int
	} {
		var out []struct {
			Name  string
			Count int
		}
		for _, k := range []string{"translate", "host", "collapse", "passthrough", "refuse"} {
			out = append(out, struct {
				Name  string
				Count int
			}{k, int(m[k])})
		}
		return out
	},
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return itoa(n) + " " + unit + "s"
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

var statusTmpl = template.Must(template.New("status").Funcs(funcs).Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="60">
<title>taskbridge status</title>
<style>
  :root { --fg:#1d2329; --muted:#5b6670; --line:#d9dee3; --bg:#f6f8fa; --ok:#1a7f37; --warn:#9a6700; --bad:#cf222e; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: #fff; }
  header { background: #24292f; color: #fff; padding: 14px 28px; display: flex; align-items: baseline; gap: 16px; flex-wrap: wrap; }
  header h1 { font-size: 20px; margin: 0; font-weight: 600; }
  header .meta { color: #c9d1d9; font-size: 13px; }
  main { padding: 20px 28px 40px; max-width: 1200px; }
  h2 { font-size: 16px; margin: 28px 0 10px; }
  .banner { padding: 10px 14px; border-radius: 6px; margin: 0 0 10px; border: 1px solid; }
  .banner.ok { background: #dafbe1; border-color: #aceebb; }
  .banner.warn { background: #fff8c5; border-color: #eed888; }
  .banner.bad { background: #ffebe9; border-color: #ffcecb; }
  .cards { display: flex; gap: 12px; flex-wrap: wrap; }
  .card { border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px; min-width: 150px; background: var(--bg); }
  .card .n { font-size: 28px; font-weight: 600; font-variant-numeric: tabular-nums; }
  .card .l { color: var(--muted); font-size: 13px; }
  table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
  th, td { text-align: left; padding: 7px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
  th { background: var(--bg); font-weight: 600; font-size: 13px; color: var(--muted); }
  td.num, th.num { text-align: right; }
  .muted { color: var(--muted); font-size: 13px; }
  .pill { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; border: 1px solid var(--line); }
  .pill.ok { color: var(--ok); border-color: var(--ok); } .pill.bad { color: var(--bad); border-color: var(--bad); }
  code { font-size: 13px; }
  time, .nw { white-space: nowrap; }
  #clients { font-size: 14px; }
  #clients td { overflow-wrap: anywhere; }
  #clients .client { font-weight: 600; }
  .chart-box { margin: 0; padding: 14px 16px 8px; border: 1px solid var(--line); border-radius: 8px; max-width: 914px; }
  .chart-box svg { display: block; width: 100%; max-width: 880px; height: auto; }
  .chart-box figcaption { color: var(--muted); font-size: 13px; margin-top: 6px; }
</style>
</head>
<body>
<header>
  <h1>taskbridge</h1>
  <span class="meta">version {{.Version}} · upstream <code>{{.Upstream}}</code> · generated {{ts .Report.Generated}}</span>
</header>
<main>
{{if .Error}}<p class="banner bad">{{.Error}}</p>{{end}}
{{if .KillSwitch}}<p class="banner bad"><strong>Kill switch is on:</strong> all new task creation is refused; existing tasks are still served.</p>{{end}}
{{with .Lock}}{{if .Drift}}<p class="banner {{if .Refusing}}bad{{else}}warn{{end}}" id="lock"><strong>The upstream differs from the verified lock</strong> <code>{{.File}}</code> (verified {{.Verified}}): {{range $i, $d := .Drift}}{{if $i}}; {{end}}{{$d}}{{end}}. {{if .Refusing}}New task starts are refused (lock_drift: refuse){{else}}New tasks are still accepted (lock_drift: warn){{end}}; run <code>taskbridge verify --lock</code> again, then reload.</p>{{else if .Error}}<p class="banner warn" id="lock">{{.Error}}</p>{{else}}<p class="banner ok" id="lock">The upstream matches the verified lock <code>{{.File}}</code> (verified {{.Verified}}, verdict {{.Verdict}}).</p>{{end}}{{end}}
{{if .Draining}}<p class="banner warn"><strong>Draining:</strong> new task-augmented calls are refused on this replica; in-flight calls and existing tasks are finishing.</p>{{end}}
{{with .Report}}{{if not .Sunset.IsZero}}
  {{if $.SunsetPast}}<p class="banner bad" id="sunset"><strong>Sunset passed</strong> on {{day .Sunset}} ({{$.DaysPast}} days ago): new legacy tasks are refused; existing tasks are served until their ttl.</p>
  {{else if $.SunsetSoon}}<p class="banner warn" id="sunset"><strong>{{.DaysLeft}} days</strong> until the sunset on {{day .Sunset}}: after it, new legacy tasks are refused.</p>
  {{else}}<p class="banner ok" id="sunset"><strong>{{.DaysLeft}} days</strong> until the sunset on {{day .Sunset}}.</p>{{end}}
{{else}}<p class="banner ok" id="sunset">No sunset date is configured.</p>{{end}}{{end}}

{{if .Report.Days}}
<h2>Legacy use per day <span class="muted">(whole UTC days; all replicas sharing the store)</span></h2>
<figure class="chart-box" id="chart">
{{chart .Report}}
<figcaption>{{with today .Report}}<strong>Today: {{plural .Clients "legacy client"}}, {{plural .Tasks "legacy task creation"}}.</strong>{{end}} A client counts on each day from its initialize to its last request; hover a point or a bar for its day. The page refreshes every minute; the numbers are in <a href="/status.json">/status.json</a> (<code>report.days</code>).</figcaption>
</figure>
{{end}}

<h2>Tasks in flight <span class="muted">(all replicas sharing the store)</span></h2>
<div class="cards" id="inflight">
  <div class="card"><div class="n">{{index .Report.InFlight "working"}}</div><div class="l">working</div></div>
  <div class="card"><div class="n">{{index .Report.InFlight "input_required"}}</div><div class="l">input_required</div></div>
  <div class="card"><div class="n">{{.Report.InFlightTotal}}</div><div class="l">total in flight</div></div>
  <div class="card"><div class="n">{{.Report.TasksCreated}}</div><div class="l">created in the last {{.Report.Window}}</div></div>
</div>

<h2>Legacy clients seen <span class="muted">(sessions since {{ts .Report.Since}})</span></h2>
{{if .Report.Clients}}
<table id="clients">
  <thead><tr><th>Client <span class="muted">version</span></th><th>Protocol</th><th>Principal</th><th>First → last seen <span class="muted">(UTC)</span></th><th class="num">Sessions</th><th class="num">Tasks created</th><th>Task routes</th></tr></thead>
  <tbody>
  {{range .Report.Clients}}<tr>
    <td><span class="client">{{.Name}}</span> <span class="muted">{{.Version}}</span></td><td class="nw">{{.ProtocolVersion}}</td><td>{{if .Principal}}{{.Principal}}{{else}}<span class="muted">no auth</span>{{end}}</td>
    <td>{{tsu .FirstSeen}} → {{tsu .LastSeen}}<br><span class="muted">{{ago $.Report.Generated .LastSeen}}</span></td>
    <td class="num">{{.Sessions}}</td><td class="num">{{.Tasks}}</td><td>{{if .ByMode}}{{modes .ByMode}}{{else}}<span class="muted">none</span>{{end}}</td>
  </tr>{{end}}
  </tbody>
</table>
{{else if eq .Report.Evidence "no_data"}}<p id="clients" class="banner warn"><strong>No data:</strong> this store holds no session and no task at all: a new store, or not the one the bridge writes. This is no evidence that nothing depends on the bridge.</p>
{{else}}<p id="clients">No legacy client was seen in this window ({{.Report.Stored.Sessions}} sessions and {{.Report.Stored.Tasks}} tasks in the store). If that stays so, the bridge can be retired (docs/operations.md).</p>{{end}}

<h2>Route decisions <span class="muted">(this replica, since it started)</span></h2>
<table id="decisions" style="max-width:520px">
  <thead><tr><th>Decision</th><th class="num">tools/call</th></tr></thead>
  <tbody>{{range decisions .Decisions}}<tr><td>{{.Name}}</td><td class="num">{{.Count}}</td></tr>{{end}}</tbody>
</table>

<h2>This replica</h2>
<table style="max-width:520px">
  <tbody>
  {{range .Checks}}<tr><td>{{.Name}}</td><td>{{if .OK}}<span class="pill ok">ok</span>{{else}}<span class="pill bad">{{.Detail}}</span>{{end}}</td></tr>{{end}}
  <tr><td>MCP requests in flight</td><td>{{.Replica.InflightRequests}}</td></tr>
  <tr><td>tasks tracked here</td><td>{{.Replica.TrackedTasks}}</td></tr>
  </tbody>
</table>
<p class="muted">Machine-readable: <a href="/status.json">/status.json</a> · <a href="/metrics">/metrics</a> · <a href="/readyz">/readyz</a>. The same report on the command line: <code>taskbridge report</code>.</p>
</main>
</body>
</html>
`))
