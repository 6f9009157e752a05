// Acceptance for the status page's picture (issue 18): /status of a real "taskbridge serve"
// on a store seeded with 30 days of legacy use, in headless Chromium driven over the
// DevTools protocol at 800 and 1280 px wide. The SVG chart shows every seeded day (bars and
// points carry the seeded numbers) and the sunset; the page does not overflow horizontally
// at 800 px and no date wraps; screenshots land in artifacts/.
package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/testenv"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store/sqlite"
)

// seededDay is what the seed put on one UTC day.
type seededDay struct {
	day            time.Time
	clients, tasks int
}

// seedLegacyUse writes 30 days of legacy sessions and tasks into db, declining towards the
// sunset like a migration that works: 8 clients and 40 task creations a day a month ago,
// one client and a few tasks today. It returns the days oldest first, today last.
func seedLegacyUse(t *testing.T, db string, now time.Time) []seededDay {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	names := []string{"acme-ide", "legacy-cli", "build-bot", "notebook", "chat-desktop", "ci-runner", "docs-agent", "ops-console"}
	today := now.Truncate(24 * time.Hour)
	var days []seededDay
	n := 0
	for ago := 29; ago >= 0; ago-- {
		i := 29 - ago
		start := today.AddDate(0, 0, -ago)
		// Offsets inside the day stay before now, whatever the hour.
		span := 20 * time.Hour
		if ago == 0 {
			span = now.Sub(today) * 9 / 10
		}
		k := max(1, int(math.Round(8*math.Pow(0.93, float64(i)))))
		tasks := max(1, int(40*math.Pow(0.9, float64(i))))
		var sessions []*record.Session
		for c := range k {
			at := start.Add(span * time.Duration(c) / time.Duration(k+1))
			se := &record.Session{ID: fmt.Sprintf("seed-%d-%d", i, c), ProtocolVersion: "2025-11-25",
				ClientInfo: json.RawMessage(fmt.Sprintf(`{"name":%q,"version":"1.%d"}`, names[c], c)),
				CreatedAt:  at, LastSeenAt: at.Add(span / time.Duration(k+1) / 2)}
			if err := st.CreateSession(ctx, se); err != nil {
				t.Fatal(err)
			}
			sessions = append(sessions, se)
		}
		for j := range tasks {
			se := sessions[j%len(sessions)]
			n++
			ttl := int64(48 * time.Hour / time.Millisecond)
			at := se.CreatedAt.Add(time.Duration(j) * time.Millisecond)
			tk := &record.Task{ID: fmt.Sprintf("%032x", n), Owner: "session:" + se.ID, SessionID: se.ID,
				RequestID: fmt.Sprint(j), Mode: record.ModeTranslate, Tool: "slow_compute", Status: record.StatusCompleted,
				CreatedAt: at, LastUpdatedAt: at, TTLMs: &ttl, Outcome: record.OutcomeSucceeded, PollIntervalMs: 1000}
			if err := st.CreateTask(ctx, tk); err != nil {
				t.Fatal(err)
			}
		}
		days = append(days, seededDay{day: start, clients: k, tasks: tasks})
	}
	return days
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// pageFacts is what the DevTools protocol measures of the rendered /status.
type pageFacts struct {
	ScrollWidth int      `json:"scrollWidth"`
	ClientWidth int      `json:"clientWidth"`
	Overflowing []string `json:"overflowing"` // elements reaching past the viewport
	WrappedDays []string `json:"wrappedDates"`
	Dates       int      `json:"dates"`
	SVG         bool     `json:"svg"`
	SVGWidth    float64  `json:"svgWidth"`
	Bars        []string `json:"bars"`   // the <title> of each bar
	Points      []string `json:"points"` // the <title> of each point
	Sunset      string   `json:"sunset"`
	Refresh     string   `json:"refresh"`
	Scripts     int      `json:"scripts"`
}

// measure is evaluated in the page by DevTools (the page itself runs no script: its CSP
// allows none).
const measure = `(() => {
  const de = document.documentElement, vw = de.clientWidth;
  const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (typeof e.className === 'string' && e.className ? '.' + e.className.split(' ').join('.') : '');
  const overflowing = [];
  for (const e of document.body.querySelectorAll('*')) {
    const r = e.getBoundingClientRect();
    if (r.width > 0 && (r.right > vw + 0.5 || r.left < -0.5)) overflowing.push(name(e) + ' right=' + Math.round(r.right));
  }
  const times = [...document.querySelectorAll('time')];
  const wrapped = times.filter(e => e.getClientRects().length > 1 || e.getBoundingClientRect().height > 1.6 * parseFloat(getComputedStyle(e).fontSize) * 1.45).map(e => e.textContent);
  const svg = document.querySelector('svg#legacy-chart');
  const titles = sel => svg ? [...svg.querySelectorAll(sel)].map(e => e.textContent) : [];
  return JSON.stringify({scrollWidth: de.scrollWidth, clientWidth: vw, overflowing: overflowing.slice(0, 20),
    wrappedDates: wrapped, dates: times.length, svg: !!svg, svgWidth: svg ? svg.getBoundingClientRect().width : 0,
    bars: titles('.bar > title'), points: titles('.point > title'),
    sunset: svg && svg.querySelector('.sunset') ? svg.querySelector('.sunset').textContent : '',
    refresh: document.querySelector('meta[http-equiv="refresh"]')?.content ?? '', scripts: document.scripts.length});
})()`

func TestStatusChartInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary and Chromium")
	}
	chromium := "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		testenv.Missing(t, "%s (Debian package chromium; scripts/test.sh installs it under CI=true)", chromium)
	}
	bin := buildTaskbridge(t, t.TempDir())
	fx := fixture.New(fixture.Options{Name: "chart-upstream", Scale: 0.2})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	now := time.Now().UTC()
	db := filepath.Join(t.TempDir(), "tb.db")
	seeded := seedLegacyUse(t, db, now)
	sunset := now.Truncate(24*time.Hour).AddDate(0, 0, 12)
	s := startServe(t, bin, up.URL+"/mcp", db, "--sunset", sunset.Format(time.DateOnly), "--audit-retention", "2160h")

	// The 30-day window is charted as 30 whole UTC days, today last: the seeded ones.
	var wantBars, wantPoints []string
	for _, d := range seeded {
		wantBars = append(wantBars, fmt.Sprintf("%s: %d legacy task creation%s", d.day.Format(time.DateOnly), d.tasks, plural(d.tasks)))
		wantPoints = append(wantPoints, fmt.Sprintf("%s: %d legacy client%s", d.day.Format(time.DateOnly), d.clients, plural(d.clients)))
	}
	art := filepath.Join(testenv.RepoRoot(t), "artifacts")
	if err := os.MkdirAll(art, 0o755); err != nil {
		t.Fatal(err)
	}
	browser := startDevTools(t, chromium)
	for _, width := range []int{800, 1280} {
		t.Run(fmt.Sprintf("%d px", width), func(t *testing.T) {
			page := browser.page(t)
			facts, png := page.render(t, s.admin+"/status", width)
			shot := filepath.Join(art, fmt.Sprintf("status-chart-%d.png", width))
			if err := os.WriteFile(shot, png, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("screenshot saved: %s (%d bytes); page %d px wide in a %d px viewport, chart %.0f px wide",
				shot, len(png), facts.ScrollWidth, facts.ClientWidth, facts.SVGWidth)
			if !facts.SVG {
				t.Fatal("no svg#legacy-chart on /status")
			}
			if strings.Join(facts.Bars, "\n") != strings.Join(wantBars, "\n") {
				t.Errorf("bars:\n%s\nwant:\n%s", strings.Join(facts.Bars, "\n"), strings.Join(wantBars, "\n"))
			}
			if strings.Join(facts.Points, "\n") != strings.Join(wantPoints, "\n") {
				t.Errorf("points:\n%s\nwant:\n%s", strings.Join(facts.Points, "\n"), strings.Join(wantPoints, "\n"))
			}
			if want := "sunset " + sunset.Format(time.DateOnly); facts.Sunset != want {
				t.Errorf("sunset mark %q, want %q", facts.Sunset, want)
			}
			if facts.Refresh != "60" || facts.Scripts != 0 {
				t.Errorf("meta refresh %q, %d scripts; want 60 and none", facts.Refresh, facts.Scripts)
			}
			if facts.ScrollWidth > facts.ClientWidth || len(facts.Overflowing) > 0 {
				t.Errorf("horizontal overflow at %d px: page %d px wide; elements past the edge: %v", width, facts.ScrollWidth, facts.Overflowing)
			}
			if facts.Dates == 0 || len(facts.WrappedDays) > 0 {
				t.Errorf("%d dates, wrapped over two lines: %v", facts.Dates, facts.WrappedDays)
			}
			if facts.SVGWidth < float64(width)-100 && facts.SVGWidth < 870 {
				t.Errorf("the chart is %.0f px wide in a %d px viewport: too small to read", facts.SVGWidth, width)
			}
		})
	}
}

// devTools is a headless Chromium with the DevTools protocol on a loopback port.
type devTools struct {
	base string // http://127.0.0.1:PORT
}

// startDevTools starts Chromium with the project's flags, a fresh profile and a DevTools
// port, and stops it at the end of the test.
func startDevTools(t *testing.T, bin string) *devTools {
	t.Helper()
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir="+t.TempDir(), "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "about:blank")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`DevTools listening on (ws://[^\s]+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	var browserWS string
	select {
	case browserWS = <-found:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("Chromium printed no DevTools address in 60 s")
	}
	// Browser.close lets Chromium stop its own helper processes before the profile
	// directory is removed; a kill of the main process would orphan them.
	t.Cleanup(func() {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		if c, _, err := websocket.DefaultDialer.Dial(browserWS, nil); err == nil {
			c.WriteJSON(map[string]any{"id": 1, "method": "Browser.close"})
			c.Close()
		}
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	u := strings.TrimPrefix(browserWS, "ws://")
	host, _, _ := strings.Cut(u, "/")
	return &devTools{base: "http://" + host}
}

// cdpPage is one tab, driven over its DevTools WebSocket.
type cdpPage struct {
	conn   *websocket.Conn
	id     int
	events []string // methods of the events seen
}

// page opens a new tab.
func (d *devTools) page(t *testing.T) *cdpPage {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, d.base+"/json/new?about:blank", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var target struct {
		WS string `json:"webSocketDebuggerUrl"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&target); err != nil || target.WS == "" {
		t.Fatalf("DevTools /json/new: HTTP %d, %v", resp.StatusCode, err)
	}
	conn, _, err := websocket.DefaultDialer.Dial(target.WS, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &cdpPage{conn: conn}
}

// call sends one command and returns its result, recording the events read meanwhile.
func (p *cdpPage) call(t *testing.T, method string, params any) json.RawMessage {
	t.Helper()
	p.id++
	if err := p.conn.WriteJSON(map[string]any{"id": p.id, "method": method, "params": params}); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	for {
		msg := p.read(t, method)
		if msg.ID == p.id {
			if msg.Error != nil {
				t.Fatalf("%s: %s", method, msg.Error)
			}
			return msg.Result
		}
	}
}

type cdpMessage struct {
	ID     int             `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func (p *cdpPage) read(t *testing.T, waiting string) cdpMessage {
	t.Helper()
	p.conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	var msg cdpMessage
	if err := p.conn.ReadJSON(&msg); err != nil {
		t.Fatalf("DevTools, waiting for %s: %v", waiting, err)
	}
	if msg.Method != "" {
		p.events = append(p.events, msg.Method)
	}
	return msg
}

// waitEvent returns once the event method has been seen.
func (p *cdpPage) waitEvent(t *testing.T, method string) {
	t.Helper()
	for {
		for _, e := range p.events {
			if e == method {
				return
			}
		}
		p.read(t, method)
	}
}

// render loads url in a viewport width px wide, measures it, and takes a full-page PNG.
func (p *cdpPage) render(t *testing.T, url string, width int) (pageFacts, []byte) {
	t.Helper()
	p.call(t, "Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": false})
	p.call(t, "Page.enable", map[string]any{})
	p.events = nil
	p.call(t, "Page.navigate", map[string]any{"url": url})
	p.waitEvent(t, "Page.loadEventFired")
	var eval struct {
		Result struct {
			Value string `json:"value"`
		} `json:"result"`
	}
	json.Unmarshal(p.call(t, "Runtime.evaluate", map[string]any{"expression": measure, "returnByValue": true}), &eval)
	var facts pageFacts
	if err := json.Unmarshal([]byte(eval.Result.Value), &facts); err != nil {
		t.Fatalf("page measurement %q: %v", eval.Result.Value, err)
	}
	var metrics struct {
		Content struct {
			Height float64 `json:"height"`
		} `json:"cssContentSize"`
	}
	json.Unmarshal(p.call(t, "Page.getLayoutMetrics", map[string]any{}), &metrics)
	p.call(t, "Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": int(math.Ceil(metrics.Content.Height)), "deviceScaleFactor": 1, "mobile": false})
	var shot struct {
		Data string `json:"data"`
	}
	json.Unmarshal(p.call(t, "Page.captureScreenshot", map[string]any{"format": "png"}), &shot)
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil || len(png) < 10_000 || !strings.HasPrefix(string(png), "\x89PNG") {
		t.Fatalf("screenshot: %d bytes, %v", len(png), err)
	}
	return facts, png
}
