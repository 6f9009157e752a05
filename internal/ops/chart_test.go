package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/taskbridge/taskbridge/record"
)

func TestNiceMax(t *testing.T) {
	for v, want := range map[int]int{0: 1, 1: 1, 2: 2, 3: 5, 8: 10, 10: 10, 11: 20, 40: 50, 51: 100, 370: 500} {
		if got := niceMax(v); got != want {
			t.Errorf("niceMax(%d) = %d, want %d", v, got, want)
		}
	}
}

// TestReportDays: whole UTC days, as many as the window has, today last; a session counts
// on every day from its initialize to its last request, once per client; tasks per day.
func TestReportDays(t *testing.T) {
	st := openSQLite(t)
	ctx := context.Background()
	now := time.Date(2027, 5, 10, 9, 30, 0, 0, time.UTC)
	today := time.Date(2027, 5, 10, 0, 0, 0, 0, time.UTC)
	for _, se := range []record.Session{
		// ide: two sessions of one client on 05-08, one of them lasting into 05-09.
		{ID: "a", ProtocolVersion: "2025-11-25", ClientInfo: json.RawMessage(`{"name":"ide","version":"1"}`), CreatedAt: today.Add(-48 * time.Hour), LastSeenAt: today.Add(-20 * time.Hour)},
		{ID: "b", ProtocolVersion: "2025-11-25", ClientInfo: json.RawMessage(`{"name":"ide","version":"1"}`), CreatedAt: today.Add(-47 * time.Hour), LastSeenAt: today.Add(-46 * time.Hour)},
		// cli: today only.
		{ID: "c", ProtocolVersion: "2025-11-25", ClientInfo: json.RawMessage(`{"name":"cli","version":"2"}`), CreatedAt: today.Add(time.Hour), LastSeenAt: today.Add(2 * time.Hour)},
		// old: before the window.
		{ID: "d", ProtocolVersion: "2025-11-25", CreatedAt: today.AddDate(0, 0, -10), LastSeenAt: today.AddDate(0, 0, -10)},
	} {
		if err := st.CreateSession(ctx, &se); err != nil {
			t.Fatal(err)
		}
	}
	for i, at := range []time.Time{today.Add(-47 * time.Hour), today.Add(-46 * time.Hour), today.Add(time.Hour)} {
		tk := &record.Task{ID: fmt.Sprint("t", i), Owner: "session:a", SessionID: "a", Mode: record.ModeTranslate, Status: record.StatusCompleted,
			CreatedAt: at, LastUpdatedAt: at}
		if err := st.CreateTask(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	r, err := BuildReport(ctx, st, now, 3*24*time.Hour, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range r.Days {
		got = append(got, fmt.Sprintf("%s %d %d", d.Day.Format(time.DateOnly), d.Clients, d.Tasks))
	}
	if want := "2027-05-08 1 2, 2027-05-09 1 0, 2027-05-10 1 1"; strings.Join(got, ", ") != want {
		t.Errorf("days %s, want %s", strings.Join(got, ", "), want)
	}
}

func TestChartSunsetMark(t *testing.T) {
	today := time.Date(2027, 5, 10, 0, 0, 0, 0, time.UTC)
	var days []DayRow
	for i := range 30 {
		days = append(days, DayRow{Day: today.AddDate(0, 0, i-29), Clients: 30 - i, Tasks: 3 * (30 - i)})
	}
	for _, c := range []struct {
		name   string
		sunset time.Time
		want   []string
		not    []string
	}{
		{"far ahead: arrow at the edge", today.AddDate(0, 0, 79), []string{"sunset 2027-07-28, in 79 days →"}, []string{`class="future"`, "stroke-dasharray"}},
		{"within the window ahead: axis extended", today.AddDate(0, 0, 12), []string{`class="future"`, "stroke-dasharray", ">sunset 2027-05-22<"}, []string{"→"}},
		{"passed within the window: a line", today.AddDate(0, 0, -5), []string{"stroke-dasharray", ">sunset 2027-05-05<"}, []string{`class="future"`}},
		{"passed before the window", today.AddDate(0, 0, -60), []string{"← sunset 2027-03-11 (passed)"}, []string{"stroke-dasharray"}},
		{"none", time.Time{}, []string{"No sunset date is configured."}, []string{`class="sunset"`}},
	} {
		svg := string(legacyChart(days, c.sunset))
		if n := strings.Count(svg, `class="bar"`); n != 30 || strings.Count(svg, `class="point"`) != 30 {
			t.Errorf("%s: %d bars, %d points", c.name, n, strings.Count(svg, `class="point"`))
		}
		for _, w := range c.want {
			if !strings.Contains(svg, w) {
				t.Errorf("%s: chart lacks %q", c.name, w)
			}
		}
		for _, w := range c.not {
			if strings.Contains(svg, w) {
				t.Errorf("%s: chart has %q", c.name, w)
			}
		}
		if !strings.Contains(svg, "2027-05-10: 1 legacy client<") || !strings.Contains(svg, "2027-04-11: 90 legacy task creations") {
			t.Errorf("%s: the first and last days' titles are missing", c.name)
		}
	}
	if legacyChart(nil, today) != "" {
		t.Error("a chart without days")
	}
}
