package ops

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/testenv"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
	"github.com/taskbridge/taskbridge/store/postgres"
)

// TestReportSameAsPerSession: the report aggregated in SQL (client rows and the per-day
// chart) is byte for byte the report the bridge built before by loading every session and
// reading its clientInfo with gjson, for several windows, on
// clientInfos a client may really send (missing, null-ish, numbers, empty strings,
// duplicated members, escapes, markup), on SQLite and on PostgreSQL.
func TestReportSameAsPerSession(t *testing.T) {
	for name, open := range map[string]func(*testing.T) store.Store{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			ctx := context.Background()
			now := time.Date(2027, 5, 1, 12, 0, 0, 0, time.UTC)
			infos := []string{``, `{}`, `{"name":"ide","version":"1"}`, `{"version":"1","name":"ide","title":"IDE"}`,
				`{"name":7,"version":null}`, `{"name":"","version":""}`, `{"name":"dup","name":"other","version":"2"}`,
				`{"name":"\u00e9\"<b>","version":"\ud83d\ude00"}`, `{"name":["x"],"version":{"v":1}}`, `{"name":"ide","version":"1 "}`}
			for i := range 60 {
				se := &record.Session{ID: fmt.Sprintf("s%02d", i), ProtocolVersion: []string{"2025-11-25", "2025-06-18"}[i%2],
					Principal: []string{"", "acme/alice", "acme/bob"}[i%3], CreatedAt: now.Add(-time.Duration(i*7) * time.Hour),
					LastSeenAt: now.Add(-time.Duration(i*5) * time.Hour)} // the oldest fall outside a 7-day window
				if info := infos[i%len(infos)]; info != "" {
					se.ClientInfo = json.RawMessage(info)
				}
				if err := st.CreateSession(ctx, se); err != nil {
					t.Fatal(err)
				}
				for j := range i % 4 {
					ttl := int64(3600_000)
					tk := &record.Task{ID: fmt.Sprintf("t%02d-%d", i, j), Owner: "o", SessionID: se.ID, RequestID: fmt.Sprint(j),
						Mode: []record.Mode{record.ModeTranslate, record.ModeHost, record.ModeComplete}[j%3], Tool: "t",
						Status: record.StatusCompleted, CreatedAt: now.Add(-time.Duration(i*j) * time.Hour), LastUpdatedAt: now,
						TTLMs: &ttl, Outcome: record.OutcomeSucceeded}
					if err := st.CreateTask(ctx, tk); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, window := range []time.Duration{7 * 24 * time.Hour, 36 * time.Hour, 30 * 24 * time.Hour} {
				got, err := BuildReport(ctx, st, now, window, time.Time{})
				if err != nil {
					t.Fatal(err)
				}
				want := reportFromSessions(t, st, now, window)
				want.Evidence, want.Stored = got.Evidence, got.Stored // whole-store facts (Store.Summary), not per-session aggregates
				gb, _ := json.Marshal(got)
				wb, _ := json.Marshal(want)
				if string(gb) != string(wb) {
					t.Fatalf("window %s: report aggregated in SQL:\n%s\nreport from every session:\n%s", window, gb, wb)
				}
			}
			got, _ := BuildReport(ctx, st, now, 7*24*time.Hour, time.Time{})
			if len(got.Clients) < 8 {
				t.Fatalf("only %d client rows: the data set does not exercise the grouping", len(got.Clients))
			}
		})
	}
}

// reportFromSessions is BuildReport as it was before the aggregation moved into the store:
// every session of the window loaded, clientInfo read with gjson, grouped in Go.
func reportFromSessions(t *testing.T, st store.Store, now time.Time, window time.Duration) *Report {
	ctx := context.Background()
	r := &Report{Generated: now.UTC(), Window: humanWindow(window), Since: now.Add(-window).UTC(),
		InFlight: map[string]int{string(record.StatusWorking): 0, string(record.StatusInputRequired): 0}}
	today := now.UTC().Truncate(24 * time.Hour)
	days := min(max(int((window+24*time.Hour-1)/(24*time.Hour)), 1), maxChartDays)
	firstDay := today.AddDate(0, 0, -(days - 1))
	from := r.Since
	if firstDay.Before(from) {
		from = firstDay
	}
	all, err := st.ListSessions(ctx, from)
	if err != nil {
		t.Fatal(err)
	}
	var sessions []*record.Session
	for _, se := range all {
		if !se.LastSeenAt.Before(r.Since) {
			sessions = append(sessions, se)
		}
	}
	counts, err := st.CountTasksBySession(ctx, r.Since)
	if err != nil {
		t.Fatal(err)
	}
	field := func(info json.RawMessage, f string) string {
		if v := gjson.GetBytes(info, f); v.Type == gjson.String && v.Str != "" {
			return v.Str
		}
		return "(none)"
	}
	bySession := map[string]map[string]int{}
	for _, c := range counts {
		if bySession[c.SessionID] == nil {
			bySession[c.SessionID] = map[string]int{}
		}
		bySession[c.SessionID][string(c.Mode)] += c.Count
		r.TasksCreated += c.Count
	}
	type key struct{ name, version, proto, principal string }
	rows := map[key]*ClientRow{}
	for _, se := range sessions {
		k := key{field(se.ClientInfo, "name"), field(se.ClientInfo, "version"), se.ProtocolVersion, se.Principal}
		row := rows[k]
		if row == nil {
			row = &ClientRow{Name: k.name, Version: k.version, ProtocolVersion: k.proto, Principal: k.principal,
				FirstSeen: se.CreatedAt, LastSeen: se.LastSeenAt, ByMode: map[string]int{}}
			rows[k] = row
		}
		row.Sessions++
		if se.CreatedAt.Before(row.FirstSeen) {
			row.FirstSeen = se.CreatedAt
		}
		if se.LastSeenAt.After(row.LastSeen) {
			row.LastSeen = se.LastSeenAt
		}
		for mode, n := range bySession[se.ID] {
			row.ByMode[mode] += n
			row.Tasks += n
		}
	}
	for _, row := range rows {
		r.Clients = append(r.Clients, *row)
	}
	slices.SortFunc(r.Clients, func(a, b ClientRow) int {
		return cmp.Or(b.LastSeen.Compare(a.LastSeen), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Version, b.Version),
			cmp.Compare(a.Principal, b.Principal), cmp.Compare(a.ProtocolVersion, b.ProtocolVersion))
	})
	// The chart: every session last seen in the chart's days, counted on each day it spans.
	byDay, err := st.CountTasksByDay(ctx, firstDay)
	if err != nil {
		t.Fatal(err)
	}
	r.Days = make([]DayRow, days)
	clients := make([]map[[4]string]bool, days)
	for i := range r.Days {
		r.Days[i].Day, clients[i] = firstDay.AddDate(0, 0, i), map[[4]string]bool{}
	}
	index := func(t time.Time) int { return int(t.UTC().Truncate(24*time.Hour).Sub(firstDay) / (24 * time.Hour)) }
	for _, se := range all {
		k := [4]string{field(se.ClientInfo, "name"), field(se.ClientInfo, "version"), se.ProtocolVersion, se.Principal}
		for i := max(index(se.CreatedAt), 0); i <= min(index(se.LastSeenAt), days-1); i++ {
			clients[i][k] = true
		}
	}
	for i := range r.Days {
		r.Days[i].Clients = len(clients[i])
	}
	for _, c := range byDay {
		if i := index(c.Day); i >= 0 && i < days {
			r.Days[i].Tasks += c.Count
		}
	}
	return r
}

// openPostgres returns a store on a fresh database of the test server.
func openPostgres(t *testing.T) store.Store {
	t.Helper()
	base := os.Getenv("TASKBRIDGE_TEST_PG")
	if base == "" {
		testenv.Missing(t, "TASKBRIDGE_TEST_PG is not set (start a server with: eval \"$(scripts/pg.sh)\")")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	b := make([]byte, 6)
	rand.Read(b)
	db := "tbreport_" + hex.EncodeToString(b)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), base)
		if err == nil {
			c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
			c.Close(context.Background())
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + db
	st, err := postgres.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
