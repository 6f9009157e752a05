package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/testenv"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
	"github.com/taskbridge/taskbridge/store/sqlite"
)

// TestNilSafe: every recording method is a no-op on nil (tools without /metrics pass nil).
func TestNilSafe(t *testing.T) {
	var m *Metrics
	m.Request("legacy", "tools/call", "ok", time.Second)
	m.Upstream("tools/call", "ok", time.Second)
	m.Store("get_task", nil, time.Second)
	m.TaskCreated("translate")
	m.TaskRefused("sunset")
	m.Fallback("collapse")
	m.PollCoalesced()
	m.UpstreamPoll()
	m.InputRelayed("elicitation/create")
	m.LegacyClient("c", "1", "2025-11-25")
	m.SetDraining(true)
	m.SetKillSwitch(true)
	m.SetSunset(time.Now())
	m.SetTasksSource(nil)
	if m.Transport(http.DefaultTransport) != http.DefaultTransport {
		t.Error("nil Transport must return rt unchanged")
	}
	if len(m.Values("requests_total")) != 0 {
		t.Error("nil Values must be empty")
	}
	var st store.Store
	if m.InstrumentStore(st) != nil {
		t.Error("nil InstrumentStore must return the store")
	}
}

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestLabelsAreBounded(t *testing.T) {
	m := New("v1")
	m.Request("legacy", "tools/call", Outcome(nil), time.Millisecond)
	m.Request("legacy", "x/custom-"+strings.Repeat("a", 10), Outcome(jsonrpc.ErrMethodNotFound), time.Millisecond)
	m.Request("legacy", "tools/call", Outcome(errors.New("boom")), time.Millisecond)
	for i := range maxClients + 50 {
		m.LegacyClient(fmt.Sprintf("client-%d", i), "1.0", "2025-11-25")
	}
	m.LegacyClient("evil\x00\nname", "", "2025-11-25")
	body := scrape(t, m)
	for _, want := range []string{
		`taskbridge_requests_total{face="legacy",method="tools/call",outcome="ok"} 1`,
		`taskbridge_requests_total{face="legacy",method="other",outcome="error_-32601"} 1`,
		`taskbridge_requests_total{face="legacy",method="tools/call",outcome="error_-32603"} 1`,
		`taskbridge_legacy_clients_total{client_name="other",client_version="other",protocol_version="2025-11-25"} 51`,
		`taskbridge_build_info{version="v1"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// maxClients pairs, the overflow series, and the "other" series created at zero.
	if n := strings.Count(body, "taskbridge_legacy_clients_total{"); n != maxClients+2 {
		t.Errorf("legacy client series = %d, want %d (bounded)", n, maxClients+2)
	}
	// A protocol version or an error code a peer invents does not make a series of its own.
	m.LegacyClient("client-0", "1.0", "1999-01-01-"+strings.Repeat("x", 8))
	m.Request("legacy", "tools/call", Outcome(jsonrpc.NewError(424242, "invented")), time.Millisecond)
	body = scrape(t, m)
	for _, want := range []string{
		`taskbridge_legacy_clients_total{client_name="client-0",client_version="1.0",protocol_version="other"} 1`,
		`taskbridge_requests_total{face="legacy",method="tools/call",outcome="error_other"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, "1999-01-01") || strings.Contains(body, "424242") {
		t.Error("a peer-invented label value made a series")
	}
}

// TestCountersExistFromStart: a fresh registry exports every counter family, its fixed
// vocabulary at zero, before anything happened.
func TestCountersExistFromStart(t *testing.T) {
	body := scrape(t, New("v"))
	for _, want := range []string{
		`taskbridge_requests_total{face="legacy",method="tools/call",outcome="ok"} 0`,
		`taskbridge_tasks_created_total{mode="translate"} 0`,
		`taskbridge_tasks_created_total{mode="host"} 0`,
		`taskbridge_tasks_created_total{mode="complete"} 0`,
		`taskbridge_tasks_refused_total{reason="draining"} 0`,
		`taskbridge_tasks_refused_total{reason="kill_switch"} 0`,
		`taskbridge_tasks_refused_total{reason="sunset"} 0`,
		`taskbridge_fallback_decisions_total{decision="refuse"} 0`,
		`taskbridge_polls_coalesced_total 0`,
		`taskbridge_upstream_polls_total 0`,
		`taskbridge_input_requests_relayed_total{method="elicitation/create"} 0`,
		`taskbridge_legacy_clients_total{client_name="other",client_version="other",protocol_version="other"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("a fresh /metrics lacks %s", want)
		}
	}
	// Every counter the Metrics holds, found by reflection so a family added later is
	// checked too: an empty vector is absent from the exposition altogether.
	v := reflect.ValueOf(New("v")).Elem()
	counters := 0
	for i := range v.NumField() {
		fv := v.Field(i)
		fv = reflect.NewAt(fv.Type(), unsafe.Pointer(fv.UnsafeAddr())).Elem() // unexported fields
		c, ok := fv.Interface().(prometheus.Collector)
		if !ok || (fv.Type() != reflect.TypeOf(&prometheus.CounterVec{}) && fv.Type() != reflect.TypeOf((*prometheus.Counter)(nil)).Elem()) {
			continue
		}
		ch := make(chan *prometheus.Desc, 1)
		c.Describe(ch)
		d := (<-ch).String() // Desc{fqName: "taskbridge_…", …}
		name := d[strings.Index(d, `"`)+1:]
		name = name[:strings.Index(name, `"`)]
		counters++
		if !strings.Contains(body, "\n"+name+" ") && !strings.Contains(body, "\n"+name+"{") {
			t.Errorf("counter family %s has no series at start", name)
		}
	}
	if counters < 8 {
		t.Fatalf("found %d counter fields by reflection; the check is broken", counters)
	}
}

// TestPromtoolClean: promtool check metrics finds nothing to complain about in a registry
// that has seen every kind of event (units, suffixes, help, label values).
func TestPromtoolClean(t *testing.T) {
	m := New("v1.2.3")
	m.Request("legacy", "tools/call", Outcome(jsonrpc.ErrMethodNotFound), time.Millisecond)
	m.Upstream("tools/call", "ok", time.Millisecond)
	m.Store("get_task", nil, time.Millisecond)
	m.TaskCreated("translate")
	m.TaskRefused("sunset")
	m.Fallback("collapse")
	m.PollCoalesced()
	m.UpstreamPoll()
	m.InputRelayed("elicitation/create")
	m.LegacyClient("acme ide \"quoted\"", "2.3.1", "2025-11-25")
	m.SetDraining(true)
	m.SetKillSwitch(true)
	m.SetSunset(time.Date(2027, 7, 28, 0, 0, 0, 0, time.UTC))
	m.SetTasksSource(func(context.Context) (map[string]int, error) { return map[string]int{"working": 2}, nil })
	testenv.PromtoolCheck(t, scrape(t, m))
}

func TestTransportTimesUpstreamExchanges(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tasks/get" {
			http.Error(w, "nope", http.StatusBadGateway)
			return
		}
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}))
	defer up.Close()
	m := New("v")
	c := &http.Client{Transport: m.Transport(http.DefaultTransport)}
	for _, method := range []string{"tools/call", "tasks/get"} {
		req, _ := http.NewRequest("POST", up.URL, strings.NewReader("{}"))
		req.Header.Set("Mcp-Method", method)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	up.Close()
	req, _ := http.NewRequest("POST", up.URL, nil)
	req.Header.Set("Mcp-Method", "tools/call")
	if _, err := c.Do(req); err == nil {
		t.Fatal("want a transport error from a closed server")
	}
	body := scrape(t, m)
	for _, want := range []string{
		`taskbridge_upstream_request_duration_seconds_count{method="tools/call",outcome="ok"} 1`,
		`taskbridge_upstream_request_duration_seconds_count{method="tasks/get",outcome="http_502"} 1`,
		`taskbridge_upstream_request_duration_seconds_count{method="tools/call",outcome="transport_error"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestInstrumentedStoreAndTasksGauge(t *testing.T) {
	raw, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "tb.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	m := New("v")
	st := m.InstrumentStore(raw)
	if Unwrap(st) != raw {
		t.Error("Unwrap does not return the wrapped store")
	}
	ctx := context.Background()
	if _, err := st.GetTask(ctx, "missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetTask: %v", err)
	}
	now := time.Now()
	if err := st.CreateTask(ctx, &record.Task{ID: "a", Owner: "o", Status: record.StatusWorking, CreatedAt: now, LastUpdatedAt: now, Outcome: record.OutcomePending}); err != nil {
		t.Fatal(err)
	}
	m.SetTasksSource(func(ctx context.Context) (map[string]int, error) {
		ts, err := st.ListActive(ctx)
		return map[string]int{"working": len(ts)}, err
	})
	body := scrape(t, m)
	for _, want := range []string{
		`taskbridge_store_operation_duration_seconds_count{op="get_task",outcome="ok"} 1`, // not found is an answer
		`taskbridge_store_operation_duration_seconds_count{op="create_task",outcome="ok"} 1`,
		`taskbridge_tasks_in_flight{status="working"} 1`,
		`taskbridge_tasks_in_flight{status="input_required"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestDaysUntilAndSunsetGauge(t *testing.T) {
	sunset := time.Date(2027, 7, 28, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		now  time.Time
		want int
	}{
		{sunset.Add(-48 * time.Hour), 2},
		{sunset.Add(-47 * time.Hour), 1},
		{sunset, 0},
		{sunset.Add(time.Hour), -1},
		{sunset.Add(24 * time.Hour), -1},
	} {
		if got := DaysUntil(sunset, c.now); got != c.want {
			t.Errorf("DaysUntil(%v) = %d, want %d", c.now, got, c.want)
		}
	}
	m := New("v")
	soon := time.Now().Add(10 * 24 * time.Hour)
	m.SetSunset(soon)
	left := m.Values("sunset_remaining_seconds")[""]
	if want := (10 * 24 * time.Hour).Seconds(); left > want || left < want-60 {
		t.Errorf("sunset_remaining_seconds = %v, want about %v", left, want)
	}
	if v := m.Values("sunset_timestamp_seconds")[""]; v != float64(soon.Unix()) {
		t.Errorf("sunset_timestamp_seconds = %v", v)
	}
	m.SetSunset(time.Time{})
	if _, ok := m.Values("sunset_remaining_seconds")[""]; ok {
		t.Error("sunset_remaining_seconds without a sunset: want no series")
	}
}
