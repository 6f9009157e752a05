package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/legacyclient"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store/sqlite"
)

// passthrough: direct vs bridge vs the reference proxies (nginx, Caddy, a tuned
// httputil.ReverseProxy) on a trivial synchronous tools/call, all in one run: every round
// measures every path in turn, so a change in the machine's load hits all of them alike.
func passthrough(ctx context.Context, o options, dir string) error {
	fmt.Println("1. pass-through: tools/call echo (synchronous), direct vs through the bridge and the reference proxies")
	fx, err := startFixture(ctx, o.fixtureBin)
	if err != nil {
		return err
	}
	defer fx.stop()
	upURL := fx.url
	var extra []string
	if o.profile != "" {
		extra = []string{"--admin", "127.0.0.1:0"}
	}
	br, err := startBridge(ctx, o.bin, upURL, "sqlite:"+filepath.Join(dir, "pt.db"), extra...)
	if err != nil {
		return err
	}
	defer br.stop()
	proxies := startProxies(ctx, o, dir, upURL)
	for _, p := range proxies {
		defer p.stop()
	}
	sids := make([]string, 32)
	for i := range sids {
		if sids[i], err = legacySession(ctx, br.url); err != nil {
			return err
		}
	}
	fmt.Printf("   %-5s %-7s %9s %9s %10s   %s\n", "conc", "path", "p50", "p99", "req/s", "vs direct")
	table := map[int]map[string]stats{}
	for _, conc := range []int{1, 8, 32} {
		client := newHTTPClient(conc)
		paths := []benchPath{
			{"direct", func(int) (func() error, error) { return directPoster(client, upURL), nil }},
			{"bridge", func(i int) (func() error, error) { return bridgePoster(client, br.url, sids[i], echoLegacy), nil }},
		}
		for _, p := range proxies {
			paths = append(paths, benchPath{p.name, func(int) (func() error, error) { return directPoster(client, p.url), nil }})
		}
		res, err := measure(ctx, o, conc, paths)
		if err != nil {
			return err
		}
		table[conc] = res
		d := res["direct"]
		for _, p := range paths {
			s := res[p.name]
			cmp := ""
			if p.name != "direct" {
				cmp = fmt.Sprintf("+%s p50, +%s p99, throughput ×%.2f", us(s.p50-d.p50), us(s.p99-d.p99), s.rps/d.rps)
			}
			fmt.Printf("   %-5d %-7s %9s %9s %10.0f   %s\n", conc, p.name, us(s.p50), us(s.p99), s.rps, cmp)
		}
	}
	printRatios(table, proxies)
	if o.profile != "" {
		return profileBridge(ctx, o, br, sids)
	}
	return nil
}

// benchPath is one way to the upstream: direct, through the bridge, or through a proxy.
type benchPath struct {
	name string
	w    func(i int) (func() error, error)
}

// measure runs a warm-up and then o.rounds rounds of every path at conc clients, and
// returns each path's medians.
func measure(ctx context.Context, o options, conc int, paths []benchPath) (map[string]stats, error) {
	all := map[string][]stats{}
	for _, p := range paths { // warm-up
		if _, err := load(ctx, conc, 300*time.Millisecond, p.w); err != nil {
			return nil, err
		}
	}
	for range o.rounds {
		for _, p := range paths {
			s, err := load(ctx, conc, o.duration, p.w)
			if err != nil {
				return nil, err
			}
			if s.errs > 0 {
				return nil, fmt.Errorf("%s at %d clients: %d errors", p.name, conc, s.errs)
			}
			all[p.name] = append(all[p.name], s)
		}
	}
	res := map[string]stats{}
	for name, rs := range all {
		res[name] = summarize(rs)
	}
	return res, nil
}

// printRatios compares the bridge with each reference proxy on the two figures the targets
// name: the p50 a hop adds at 1 client, and the share of direct throughput it keeps at 32
// clients (docs/benchmarks.md: added p50 ≤ 2× nginx's and < ½ Caddy's; throughput share
// ≥ 0.85× nginx's and > 2× Caddy's).
func printRatios(table map[int]map[string]stats, proxies []proxy) {
	one, many := table[1], table[32]
	if one == nil || many == nil {
		return
	}
	added := func(name string) time.Duration { return one[name].p50 - one["direct"].p50 }
	share := func(name string) float64 { return many[name].rps / many["direct"].rps }
	fmt.Println("   bridge against each reference proxy (added p50 at 1 client; share of direct throughput at 32 clients):")
	for _, p := range proxies {
		ratio := "n/a (the proxy added nothing measurable)"
		if a := added(p.name); a > 0 {
			ratio = fmt.Sprintf("×%.2f", float64(added("bridge"))/float64(a))
		}
		fmt.Printf("   %-7s added p50 %s vs bridge %s: bridge %s; throughput share %.2f vs bridge %.2f: bridge ×%.2f\n",
			p.name, us(added(p.name)), us(added("bridge")), ratio, share(p.name), share("bridge"), share("bridge")/share(p.name))
	}
}

// summarize takes the median of each figure over rounds.
func summarize(rs []stats) stats {
	cmpDur := func(a, b time.Duration) int { return int(a - b) }
	var p50, p99 []time.Duration
	var rps []float64
	for _, r := range rs {
		p50, p99, rps = append(p50, r.p50), append(p99, r.p99), append(rps, r.rps)
	}
	return stats{p50: median(p50, cmpDur), p99: median(p99, cmpDur),
		rps: median(rps, func(a, b float64) int {
			if a < b {
				return -1
			}
			if a > b {
				return 1
			}
			return 0
		})}
}

func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// creation: task-augmented calls per second, durable write-through included.
func creation(ctx context.Context, o options, dir string) error {
	fmt.Println("2. task creation: tools/call greet with params.task (intent + upstream answer written through)")
	fx, err := startFixture(ctx, o.fixtureBin)
	if err != nil {
		return err
	}
	defer fx.stop()
	upURL := fx.url
	stores := []string{"sqlite:" + filepath.Join(dir, "create.db")}
	if o.pg != "" {
		stores = append(stores, o.pg)
	} else {
		fmt.Println("   (no -pg DSN / TASKBRIDGE_TEST_PG: PostgreSQL figure skipped)")
	}
	for _, spec := range stores {
		br, err := startBridge(ctx, o.bin, upURL, spec)
		if err != nil {
			return err
		}
		const conc = 8
		client := newHTTPClient(conc)
		var seq atomic.Int64
		w := func(int) (func() error, error) {
			sid, err := legacySession(ctx, br.url)
			if err != nil {
				return nil, err
			}
			return func() error {
				body := []byte(`{"jsonrpc":"2.0","id":` + strconv.FormatInt(seq.Add(1), 10) + `,"method":"tools/call","params":{"name":"greet","arguments":{"name":"x"},"task":{}}}`)
				return bridgePoster(client, br.url, sid, body)()
			}, nil
		}
		s, err := load(ctx, conc, 2*o.duration, w)
		br.stop()
		if err != nil {
			return err
		}
		name := "sqlite"
		if spec != stores[0] {
			name = "postgres"
		}
		fmt.Printf("   %-9s %7.0f tasks/s  (p50 %s, p99 %s, %d clients, %d errors)\n", name, s.rps, us(s.p50), us(s.p99), conc, s.errs)
	}
	return nil
}

// polling: many pollers on a few running tasks; the upstream's tasks/get rate must not
// depend on the number of pollers.
func polling(ctx context.Context, o options, dir string) error {
	const interval = 500
	fmt.Printf("3. polling: %d legacy pollers on %d running tasks, upstream pollIntervalMs %d\n", o.pollers, o.pollTasks, interval)
	fx, err := startFixture(ctx, o.fixtureBin, "-poll-ms", strconv.Itoa(interval))
	if err != nil {
		return err
	}
	defer fx.stop()
	upURL := fx.url
	br, err := startBridge(ctx, o.bin, upURL, "sqlite:"+filepath.Join(dir, "poll.db"), "--poll-floor-ms", strconv.Itoa(interval))
	if err != nil {
		return err
	}
	defer br.stop()
	sids := make([]string, o.pollTasks)
	tids := make([]string, o.pollTasks)
	for i := range sids {
		c := legacyclient.New(br.url)
		if _, err := c.Initialize(ctx); err != nil {
			return err
		}
		res, err := c.Call(ctx, "tools/call", []byte(`{"name":"slow_compute","arguments":{"seconds":3600},"task":{}}`))
		if err != nil {
			return err
		}
		sids[i], tids[i] = c.SessionID(), gjson.GetBytes(res, "task.taskId").Str
	}
	client := newHTTPClient(o.pollers)
	w := func(i int) (func() error, error) {
		body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"` + tids[i%len(tids)] + `"}}`)
		return bridgePoster(client, br.url, sids[i%len(sids)], body), nil
	}
	d := 5 * o.duration
	before := fx.taskGets()
	t0 := time.Now()
	s, err := load(ctx, o.pollers, d, w)
	if err != nil {
		return err
	}
	el := time.Since(t0).Seconds()
	gets := fx.taskGets() - before
	want := float64(o.pollTasks) * 1000 / interval
	fmt.Printf("   client tasks/get: %.0f/s, p50 %s, p99 %s (%d errors)\n", s.rps, us(s.p50), us(s.p99), s.errs)
	fmt.Printf("   upstream tasks/get: %.1f/s, expected tasks×1000/pollIntervalMs = %.1f/s (ratio %.2f)\n", float64(gets)/el, want, float64(gets)/el/want)
	return nil
}

// scale: tasks/list over many records, and memory with many tracked tasks.
func scale(ctx context.Context, o options, dir string) error {
	fmt.Printf("4. scale: tasks/list over %d records; memory with %d tracked tasks\n", o.records, o.tracked)
	db := filepath.Join(dir, "scale.db")
	sid, err := seed(ctx, db, o.records)
	if err != nil {
		return err
	}
	fx, err := startFixture(ctx, o.fixtureBin, "-poll-ms", "30000")
	if err != nil {
		return err
	}
	defer fx.stop()
	upURL := fx.url
	br, err := startBridge(ctx, o.bin, upURL, "sqlite:"+db)
	if err != nil {
		return err
	}
	defer br.stop()
	c := legacyclient.New(br.url)
	c.SetSessionID(sid)
	var lat []time.Duration
	cursor := ""
	for range 200 {
		params := `{}`
		if cursor != "" {
			params = `{"cursor":"` + cursor + `"}`
		}
		t0 := time.Now()
		res, err := c.Call(ctx, "tasks/list", []byte(params))
		if err != nil {
			return err
		}
		lat = append(lat, time.Since(t0))
		if cursor = gjson.GetBytes(res, "nextCursor").Str; cursor == "" {
			break
		}
	}
	s := pct(lat)
	fmt.Printf("   tasks/list page (50 tasks) over %d records: p50 %s, p99 %s (%d pages)\n", o.records, us(s.p50), us(s.p99), len(lat))

	base := rssMB(br.cmd.Process.Pid)
	var wg sync.WaitGroup
	var made, errs atomic.Int64
	const workers = 16
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lc := legacyclient.New(br.url)
			if _, err := lc.Initialize(ctx); err != nil {
				errs.Add(1)
				return
			}
			for made.Add(1) <= int64(o.tracked) {
				if _, err := lc.Call(ctx, "tools/call", []byte(`{"name":"slow_compute","arguments":{"seconds":3600},"task":{}}`)); err != nil {
					errs.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	time.Sleep(time.Second)
	rss := rssMB(br.cmd.Process.Pid)
	fmt.Printf("   bridge RSS: %.0f MB at start (%d records), %.0f MB with %d tracked non-terminal tasks (%d errors)\n",
		base, o.records, rss, o.tracked, errs.Load())
	return nil
}

func pct(lat []time.Duration) stats {
	if len(lat) == 0 {
		return stats{}
	}
	c := slices.Clone(lat)
	slices.Sort(c)
	return stats{p50: c[len(c)/2], p99: c[min(len(c)-1, len(c)*99/100)]}
}

// seed writes a session and n completed task records owned by it straight into a store.
func seed(ctx context.Context, path string, n int) (string, error) {
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		return "", err
	}
	defer st.Close()
	now := time.Now().UTC()
	sid := "bench-session-0000000000000000"
	if err := st.CreateSession(ctx, &record.Session{ID: sid, ProtocolVersion: "2025-11-25", ClientInfo: []byte(`{"name":"tbbench","version":"1"}`),
		ClientCapabilities: []byte(`{}`), CreatedAt: now, LastSeenAt: now}); err != nil {
		return "", err
	}
	ttl := int64(24 * 3600 * 1000)
	for i := range n {
		t := &record.Task{ID: fmt.Sprintf("%032x", i+1), Owner: "session:" + sid, SessionID: sid, Origin: "bench", Mode: record.ModeComplete,
			Tool: "greet", Status: record.StatusCompleted, CreatedAt: now.Add(time.Duration(i) * time.Millisecond), LastUpdatedAt: now,
			TTLMs: &ttl, PollIntervalMs: 1000, Result: []byte(`{"content":[{"type":"text","text":"hi"}]}`), Outcome: record.OutcomeSucceeded}
		if err := st.CreateTask(ctx, t); err != nil {
			return "", err
		}
	}
	return sid, nil
}
