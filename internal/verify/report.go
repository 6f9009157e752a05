package verify

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/taskbridge/taskbridge/internal/metrics"
)

// SchemaID names the JSON form of a Report (docs/verify.schema.json).
const SchemaID = "https://taskbridge.dev/schemas/verify-report-1.json"

// Result is one check's outcome.
type Result string

// The three outcomes of a check; a gate and the whole run are only pass or fail.
const (
	Pass    Result = "pass"
	Fail    Result = "fail"
	Skipped Result = "skipped"
)

// GateOrder is the order of the gates in the report.
var GateOrder = []string{"contract", "security", "recovery", "cancellation", "load", "compatibility"}

// Fact is one pinned fact at the top of the report.
type Fact struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Check is one line of the verdict table. Evidence is one line: what was seen.
type Check struct {
	Gate     string  `json:"gate"`
	Check    string  `json:"check"`
	Result   Result  `json:"result"`
	Evidence string  `json:"evidence"`
	Seconds  float64 `json:"seconds"`
}

// GateVerdict is one gate's outcome: fail when any of its checks failed.
type GateVerdict struct {
	Gate    string `json:"gate"`
	Result  Result `json:"result"`
	Passed  int    `json:"passed"`
	Failed  int    `json:"failed"`
	Skipped int    `json:"skipped"`
}

// Report is verify's verdict, printed as a table or (--json) as this JSON.
type Report struct {
	Schema  string        `json:"$schema"`
	Date    string        `json:"date"`
	Verdict Result        `json:"verdict"`
	Facts   []Fact        `json:"facts"`
	Gates   []GateVerdict `json:"gates"`
	Checks  []Check       `json:"checks"`

	progress io.Writer
}

func newReport(o Options, p *Plan) *Report {
	facts := append([]Fact(nil), o.Facts...)
	plan := "none (read-only tools only)"
	if p.hash != "" {
		plan = "sha256:" + p.hash
	}
	facts = append(facts, Fact{"plan", plan})
	return &Report{Schema: SchemaID, Date: o.Now().UTC().Format(time.RFC3339), Facts: facts, progress: o.Progress}
}

// add records a check and prints its progress line.
func (rep *Report) add(c Check) {
	c.Evidence = oneLine(c.Evidence)
	rep.Checks = append(rep.Checks, c)
	if rep.progress != nil {
		fmt.Fprintf(rep.progress, "verify: %-13s %-34s %-7s %s\n", c.Gate, c.Check, c.Result, c.Evidence)
	}
}

// Fact adds a pinned fact found during the run (the upstream's name, the route).
func (rep *Report) fact(name, value string) {
	for i := range rep.Facts {
		if rep.Facts[i].Name == name {
			rep.Facts[i].Value = value
			return
		}
	}
	rep.Facts = append(rep.Facts, Fact{name, value})
}

// finish orders the checks by gate and computes the verdicts.
func (rep *Report) finish() {
	var ordered []Check
	rep.Verdict = Pass
	for _, g := range GateOrder {
		v := GateVerdict{Gate: g, Result: Pass}
		for _, c := range rep.Checks {
			if c.Gate != g {
				continue
			}
			ordered = append(ordered, c)
			switch c.Result {
			case Pass:
				v.Passed++
			case Fail:
				v.Failed++
				v.Result, rep.Verdict = Fail, Fail
			default:
				v.Skipped++
			}
		}
		rep.Gates = append(rep.Gates, v)
	}
	rep.Checks = ordered
}

// WriteText prints the pinned facts, the gate verdicts and the verdict table.
func (rep *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "taskbridge verify — %s\n", rep.Date)
	for _, f := range rep.Facts {
		fmt.Fprintf(w, "  %-22s %s\n", f.Name+":", f.Value)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GATE\tCHECK\tRESULT\tEVIDENCE")
	for _, c := range rep.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Gate, c.Check, c.Result, c.Evidence)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	var parts []string
	for _, g := range rep.Gates {
		parts = append(parts, fmt.Sprintf("%s %s (%d/%d/%d)", g.Gate, g.Result, g.Passed, g.Failed, g.Skipped))
	}
	_, err := fmt.Fprintf(w, "gates (pass/fail/skipped): %s\nverdict: %s\n", strings.Join(parts, ", "), rep.Verdict)
	return err
}

// WriteJSON prints the report as indented JSON (the schema in docs/verify.schema.json).
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// Failed names the failing checks as "gate/check".
func (rep *Report) Failed() []string {
	var out []string
	for _, c := range rep.Checks {
		if c.Result == Fail {
			out = append(out, c.Gate+"/"+c.Check)
		}
	}
	return out
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 240 {
		s = s[:237] + "..."
	}
	return s
}

// upstreamCount is the number of upstream requests of method the bridge's upstream
// client made so far (the instrumented transport's histogram; a stdio upstream counts
// through CountCall).
func upstreamCount(m *metrics.Metrics, method string) int {
	fams, err := m.Registry().Gather()
	if err != nil {
		return -1
	}
	n := 0
	for _, f := range fams {
		if f.GetName() != metrics.Namespace+"_upstream_request_duration_seconds" {
			continue
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "method" && l.GetValue() == method {
					n += int(mt.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return n
}
