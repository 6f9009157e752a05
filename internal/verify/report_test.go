package verify

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// goldenReport is a report with one check of every outcome: a failing security check
// fails its gate and the verdict; a skipped check fails nothing.
func goldenReport() *Report {
	o := Options{Now: func() time.Time { return time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC) },
		Facts: []Fact{{"bridge", "taskbridge v1.2.3"}, {"upstream", "http://127.0.0.1:9000/mcp"}, {"upstream era", "2026-07-28"}}}
	rep := newReport(o, &Plan{hash: "0123456789abcdef"})
	rep.fact("task tool", "slow_compute")
	rep.add(Check{Gate: "contract", Check: "initialize 2025-11-25", Result: Pass, Evidence: "protocolVersion 2025-11-25", Seconds: 0.01})
	rep.add(Check{Gate: "security", Check: "authenticated task listing", Result: Fail,
		Evidence: "task listing without an authenticated context:\n the configuration has no auth section", Seconds: 0})
	rep.add(Check{Gate: "load", Check: "records purged after ttl + retention", Result: Skipped, Evidence: "the upstream's task ttl outlives the run"})
	rep.add(Check{Gate: "recovery", Check: "initial call never repeated", Result: Pass, Evidence: "verify sent 3 tools/call; the upstream got 3", Seconds: 0})
	rep.finish()
	return rep
}

// TestReportGolden (issue 19, acceptance 3): the JSON and the text form of a report are
// pinned, and the JSON validates against docs/verify.schema.json.
func TestReportGolden(t *testing.T) {
	rep := goldenReport()
	var js, txt bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.golden.json", js.Bytes())
	golden(t, "report.golden.txt", txt.Bytes())
	if err := ValidateReportJSON(t, js.Bytes()); err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != Fail || rep.Gates[1].Result != Fail || rep.Gates[4].Result != Pass {
		t.Errorf("verdicts: %s %+v", rep.Verdict, rep.Gates)
	}
	if got := rep.Failed(); len(got) != 1 || got[0] != "security/authenticated task listing" {
		t.Errorf("Failed() = %v", got)
	}
}

// TestSchemaRejects: the schema is not a rubber stamp.
func TestSchemaRejects(t *testing.T) {
	var js bytes.Buffer
	_ = goldenReport().WriteJSON(&js)
	var v map[string]any
	_ = json.Unmarshal(js.Bytes(), &v)
	v["verdict"] = "maybe"
	b, _ := json.Marshal(v)
	if ValidateReportJSON(t, b) == nil {
		t.Error("a verdict of maybe validated")
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (-update rewrites it):\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

// ValidateReportJSON validates b against docs/verify.schema.json.
func ValidateReportJSON(t *testing.T, b []byte) error {
	t.Helper()
	return validateAgainst(filepath.Join("..", "..", "docs", "verify.schema.json"), b)
}

func validateAgainst(schemaPath string, b []byte) error {
	c := jsonschema.NewCompiler()
	sch, err := c.Compile(schemaPath)
	if err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return sch.Validate(doc)
}
