package mapping

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/taskbridge/taskbridge/record"
)

func TestTaskToLegacy(t *testing.T) {
	created := time.Date(2026, 11, 29, 8, 21, 21, 240_500_000, time.FixedZone("CET", 3600))
	cases := []struct {
		name string
		rec  record.Task
		want string
	}{
		{"full", record.Task{ID: "tb-1", UpstreamTaskID: "up-secret", Status: record.StatusWorking, StatusMessage: "step 1",
			CreatedAt: created, LastUpdatedAt: created.Add(1002 * time.Millisecond), TTLMs: i64(120000), PollIntervalMs: 1000},
			`{"taskId":"tb-1","status":"working","statusMessage":"step 1","createdAt":"2026-11-29T07:21:21.240Z","lastUpdatedAt":"2026-11-29T07:21:22.242Z","ttl":120000,"pollInterval":1000}`},
		{"unlimited ttl is null, no poll interval", record.Task{ID: "tb-2", Status: record.StatusCompleted, CreatedAt: created, LastUpdatedAt: created},
			`{"taskId":"tb-2","status":"completed","createdAt":"2026-11-29T07:21:21.240Z","lastUpdatedAt":"2026-11-29T07:21:21.240Z","ttl":null}`},
		{"zero LastUpdatedAt shows CreatedAt", record.Task{ID: "tb-3", Status: record.StatusFailed, StatusMessage: "boom", CreatedAt: created, TTLMs: i64(0)},
			`{"taskId":"tb-3","status":"failed","statusMessage":"boom","createdAt":"2026-11-29T07:21:21.240Z","lastUpdatedAt":"2026-11-29T07:21:21.240Z","ttl":0}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lt := TaskToLegacy(&tc.rec)
			got, _ := json.Marshal(lt)
			if string(got) != tc.want {
				t.Fatalf("\n got %s\nwant %s", got, tc.want)
			}
			if tc.rec.TTLMs != nil && lt.TTL == tc.rec.TTLMs {
				t.Fatal("TTL pointer shared with the record")
			}
		})
	}
	c, _ := json.Marshal(CreateResultForLegacy(&cases[1].rec))
	if string(c) != `{"task":`+cases[1].want+`}` {
		t.Fatalf("CreateResultForLegacy: %s", c)
	}
}

func TestClampPollInterval(t *testing.T) {
	cases := []struct{ up, floor, ceil, want int64 }{
		{200, 500, 30000, 500},     // upstream too eager: floor
		{0, 500, 30000, 500},       // absent: floor
		{-5, 500, 30000, 500},      // nonsense: floor
		{5000, 500, 30000, 5000},   // within bounds
		{60000, 500, 30000, 30000}, // too slow: ceiling
		{100, 0, 0, 100},           // no bounds
		{0, 0, 0, 0},               // absent, no floor
		{100, 0, 50, 50},           // ceiling only
		{100, 2000, 1000, 1000},    // floor above ceiling: ceiling wins
	}
	for _, tc := range cases {
		if got := ClampPollInterval(tc.up, tc.floor, tc.ceil); got != tc.want {
			t.Errorf("ClampPollInterval(%d, %d, %d) = %d, want %d", tc.up, tc.floor, tc.ceil, got, tc.want)
		}
	}
}

func TestCapTTL(t *testing.T) {
	str := func(p *int64) string {
		if p == nil {
			return "nil"
		}
		b, _ := json.Marshal(*p)
		return string(b)
	}
	cases := []struct {
		in   *int64
		max  int64
		want string
	}{
		{nil, 0, "nil"},
		{nil, 3600000, "3600000"},
		{i64(60000), 3600000, "60000"},
		{i64(7200000), 3600000, "3600000"},
		{i64(7200000), 0, "7200000"},
		{i64(-1), 3600000, "3600000"},
		{i64(-1), 0, "nil"},
		{i64(0), 10, "0"},
	}
	for _, tc := range cases {
		got := CapTTL(tc.in, tc.max)
		if str(got) != tc.want {
			t.Errorf("CapTTL(%s, %d) = %s, want %s", str(tc.in), tc.max, str(got), tc.want)
		}
		if got != nil && got == tc.in {
			t.Errorf("CapTTL(%s, %d) aliases its input", str(tc.in), tc.max)
		}
	}
}
