package ops

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/taskbridge/taskbridge/internal/metrics"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

// Report is the migration report: which legacy clients still use the bridge, what is in
// flight, and how long until the sunset. It is built from the store, so every replica
// sharing a store shows the same report.
type Report struct {
	Generated time.Time `json:"generated"`
	Window    string    `json:"window"`
	Since     time.Time `json:"since"`
	// Sunset is zero when none is configured; DaysLeft is then meaningless.
	Sunset   time.Time `json:"sunset,omitzero"`
	DaysLeft int       `json:"daysLeft"`

	Clients  []ClientRow    `json:"clients"`
	InFlight map[string]int `json:"inFlight"` // non-terminal tasks by status, all replicas
	// TasksCreated is the number of tasks created within the window, all clients.
	TasksCreated int `json:"tasksCreated"`
	// Days is the window day by day (whole UTC days, the oldest first, today last): the
	// /status chart.
	Days []DayRow `json:"days"`

	// Evidence says what the report can be trusted for: EvidenceLegacyTraffic (legacy
	// clients in the window), EvidenceNoTrafficInWindow (a bridge has used the store, no
	// legacy session in the window: nothing depends on the bridge), or EvidenceNoData (no
	// session, no task and no bridge write at all: a new or wrong store, which proves
	// nothing).
	Evidence string `json:"evidence"`
	// Stored is what the store holds in all, whatever the window.
	Stored StoredSummary `json:"stored"`
}

// The values of Report.Evidence.
const (
	EvidenceLegacyTraffic     = "legacy_traffic"
	EvidenceNoTrafficInWindow = "no_legacy_traffic_in_window"
	EvidenceNoData            = "no_data"
)

// StoredSummary counts every record in the store.
type StoredSummary struct {
	Sessions        int       `json:"sessions"`
	Tasks           int       `json:"tasks"`
	LastSessionSeen time.Time `json:"lastSessionSeen,omitzero"`
	// LastBridgeWrite is when a running bridge last wrote to this store (its heartbeat: at
	// start and on readiness checks). Sessions are purged after the window, so for an idle
	// bridge this is what shows the store is the one it uses.
	LastBridgeWrite time.Time `json:"lastBridgeWrite,omitzero"`
}

// DayRow is one UTC day of the report window.
type DayRow struct {
	Day time.Time `json:"day"`
	// Clients counts the distinct legacy clients (name, version, protocol, principal: the
	// rows of Clients) with a session open that day: a session counts on every day from its
	// initialize to its last request.
	Clients int `json:"clients"`
	// Tasks counts the tasks legacy clients created that day.
	Tasks int `json:"tasksCreated"`
}

// maxChartDays bounds the days of a report (a report_window of years would otherwise
// allocate a row per day for nothing readable).
const maxChartDays = 400

// ClientRow is one legacy client: sessions grouped by clientInfo name and version,
// protocol version and principal.
type ClientRow struct {
	Name            string         `json:"name"`
	Version         string         `json:"version"`
	ProtocolVersion string         `json:"protocolVersion"`
	Principal       string         `json:"principal"`
	FirstSeen       time.Time      `json:"firstSeen"`
	LastSeen        time.Time      `json:"lastSeen"`
	Sessions        int            `json:"sessions"`
	Tasks           int            `json:"tasks"`
	ByMode          map[string]int `json:"tasksByMode"` // translate, host, complete
}

// InFlightTotal sums the in-flight counts.
func (r *Report) InFlightTotal() int {
	n := 0
	for _, v := range r.InFlight {
		n += v
	}
	return n
}

// BuildReport reads the store: the sessions seen within window before now and their tasks,
// aggregated by the store, and every non-terminal task.
func BuildReport(ctx context.Context, st store.Store, now time.Time, window time.Duration, sunset time.Time) (*Report, error) {
	r := &Report{Generated: now.UTC(), Window: humanWindow(window), Since: now.Add(-window).UTC(), Sunset: sunset,
		InFlight: map[string]int{string(record.StatusWorking): 0, string(record.StatusInputRequired): 0}}
	if !sunset.IsZero() {
		r.DaysLeft = metrics.DaysUntil(sunset, now)
	}
	// The chart's whole UTC days: as many as the window has (30 for 30 days), today last.
	today := now.UTC().Truncate(24 * time.Hour)
	n := min(max(int((window+24*time.Hour-1)/(24*time.Hour)), 1), maxChartDays)
	firstDay := today.AddDate(0, 0, -(n - 1))
	// Aggregated in the store: the sessions themselves (one per client process, for the
	// whole window) are never loaded.
	sums, err := st.SummarizeClients(ctx, r.Since)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	if r.TasksCreated, err = st.CountTasksSince(ctx, r.Since); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	for _, c := range sums {
		row := ClientRow{Name: orNone(c.Name), Version: orNone(c.Version), ProtocolVersion: c.ProtocolVersion,
			Principal: c.Principal, FirstSeen: c.FirstSeen, LastSeen: c.LastSeen, Sessions: c.Sessions, ByMode: map[string]int{}}
		for mode, n := range c.Tasks {
			row.ByMode[string(mode)] += n
			row.Tasks += n
		}
		r.Clients = append(r.Clients, row)
	}
	slices.SortFunc(r.Clients, func(a, b ClientRow) int {
		return cmp.Or(b.LastSeen.Compare(a.LastSeen), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Version, b.Version),
			cmp.Compare(a.Principal, b.Principal), cmp.Compare(a.ProtocolVersion, b.ProtocolVersion))
	})
	active, err := st.ListActive(ctx)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	for _, t := range active {
		r.InFlight[string(t.Status)]++
	}
	spans, err := st.SummarizeClientDays(ctx, firstDay) // a session last seen before counts on no day
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	byDay, err := st.CountTasksByDay(ctx, firstDay)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	r.Days = dayRows(firstDay, today, spans, byDay)
	sum, err := st.Summary(ctx)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	r.Stored = StoredSummary{Sessions: sum.Sessions, Tasks: sum.Tasks, LastSessionSeen: sum.LastSessionSeen, LastBridgeWrite: sum.Heartbeat}
	switch {
	case len(r.Clients) > 0:
		r.Evidence = EvidenceLegacyTraffic
	case sum.Sessions == 0 && sum.Tasks == 0 && sum.Heartbeat.IsZero():
		r.Evidence = EvidenceNoData
	default:
		r.Evidence = EvidenceNoTrafficInWindow
	}
	return r, nil
}

// dayRows is the report window day by day, from first through last (both UTC midnights).
func dayRows(first, last time.Time, spans []store.ClientDays, tasks []store.DayCount) []DayRow {
	n := int(last.Sub(first)/(24*time.Hour)) + 1
	if n < 1 {
		return nil
	}
	rows := make([]DayRow, n)
	clients := make([]map[[4]string]bool, n)
	for i := range rows {
		rows[i].Day = first.AddDate(0, 0, i)
		clients[i] = map[[4]string]bool{}
	}
	index := func(t time.Time) int { return int(t.UTC().Truncate(24*time.Hour).Sub(first) / (24 * time.Hour)) }
	for _, sp := range spans {
		k := [4]string{sp.Name, sp.Version, sp.ProtocolVersion, sp.Principal}
		for i := max(index(sp.First), 0); i <= min(index(sp.Last), n-1); i++ {
			clients[i][k] = true
		}
	}
	for i := range rows {
		rows[i].Clients = len(clients[i])
	}
	for _, c := range tasks {
		if i := index(c.Day); i >= 0 && i < n {
			rows[i].Tasks += c.Count
		}
	}
	return rows
}

// orNone is how the report shows a clientInfo name or version the client did not send
// as a non-empty string.
func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// TasksInFlight counts non-terminal tasks by status (the metrics gauge source).
func TasksInFlight(st store.Store) func(context.Context) (map[string]int, error) {
	return func(ctx context.Context) (map[string]int, error) {
		active, err := st.ListActive(ctx)
		if err != nil {
			return nil, err
		}
		out := map[string]int{}
		for _, t := range active {
			out[string(t.Status)]++
		}
		return out, nil
	}
}

// humanWindow prints a window as "30 days" when it is whole days, else as a duration.
func humanWindow(d time.Duration) string {
	if d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		if n := int(d / (24 * time.Hour)); n != 1 {
			return fmt.Sprintf("%d days", n)
		}
		return "1 day"
	}
	return d.String()
}
