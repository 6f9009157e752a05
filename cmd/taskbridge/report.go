package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/taskbridge/taskbridge/internal/ops"
)

// cmdReport prints the migration report from the store: the legacy clients still seen,
// the tasks in flight, and the days left to the sunset. The same report is the /status
// page on the admin listener.
func cmdReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := command{name: "report", synopsis: "report [--config FILE] [--store DSN] [--json]",
		about: "The migration report, read from the store (read-only: it never creates or migrates one): the legacy\n" +
			"clients still seen in the window, the tasks in flight, the days to the sunset.",
		keys: []string{"store", "report_window", "sunset"}}
	open := storeFlags(fs, storeReadOnly, stderr, c.keys[1:]...)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parseArgs(fs, c, args, stdout); err != nil {
		return err
	}
	st, cfg, err := open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	r, err := ops.BuildReport(ctx, st, time.Now(), cfg.ReportWindow, cfg.Sunset)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	writeReport(stdout, r)
	return nil
}

func writeReport(w io.Writer, r *ops.Report) {
	fmt.Fprintf(w, "taskbridge migration report — %s (legacy sessions seen since %s)\n\n",
		r.Generated.Format("2006-01-02 15:04 UTC"), r.Since.Format("2006-01-02 15:04 UTC"))
	switch {
	case r.Sunset.IsZero():
		fmt.Fprintln(w, "Sunset: none configured.")
	case r.DaysLeft < 0 || !r.Generated.Before(r.Sunset):
		fmt.Fprintf(w, "Sunset: %s, passed %d days ago — new legacy tasks are refused.\n", r.Sunset.Format(time.DateOnly),
			int(r.Generated.Sub(r.Sunset)/(24*time.Hour)))
	default:
		fmt.Fprintf(w, "Sunset: %s, %d days left.\n", r.Sunset.Format(time.DateOnly), r.DaysLeft)
	}
	fmt.Fprintf(w, "Tasks in flight: %d (working %d, input_required %d); created in the window: %d.\n\n",
		r.InFlightTotal(), r.InFlight["working"], r.InFlight["input_required"], r.TasksCreated)
	switch r.Evidence {
	case ops.EvidenceNoData:
		fmt.Fprintln(w, "No data: this store holds no session and no task, and no running bridge ever wrote to it. It is a new store,")
		fmt.Fprintln(w, "or not the one the bridge writes (check --store, TASKBRIDGE_STORE or --config): no evidence that nothing depends on it.")
		return
	case ops.EvidenceNoTrafficInWindow:
		fmt.Fprintf(w, "No legacy client was seen in the window (the store holds %d sessions and %d tasks; the last session was seen %s;\n",
			r.Stored.Sessions, r.Stored.Tasks, lastSeen(r.Stored.LastSessionSeen))
		fmt.Fprintf(w, "a running bridge last wrote to it %s): nothing depends on the bridge any more\n", lastSeen(r.Stored.LastBridgeWrite))
		fmt.Fprintln(w, "(see docs/operations.md, When to retire the bridge).")
		return
	}
	fmt.Fprintln(w, "Legacy clients still seen:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLIENT\tVERSION\tPROTOCOL\tPRINCIPAL\tFIRST SEEN\tLAST SEEN\tSESSIONS\tTASKS\tROUTES")
	for _, c := range r.Clients {
		p := c.Principal
		if p == "" {
			p = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", termSafe(c.Name), termSafe(c.Version), termSafe(c.ProtocolVersion), termSafe(p),
			c.FirstSeen.Format("2006-01-02 15:04"), c.LastSeen.Format("2006-01-02 15:04"), c.Sessions, c.Tasks, modes(c.ByMode))
	}
	tw.Flush()
}

// lastSeen prints a time of the report's summary, "never" when zero.
func lastSeen(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return "on " + t.UTC().Format("2006-01-02 15:04 UTC")
}

func modes(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, ",")
}
