package bridge_test

// The golden-transcript runner, one for every route behind the front door: each
// testdata/<route>/*.txtar file is one real exchange between a client, the bridge (the
// era router's pair of routes behind a Door, as the binary builds them) and a scripted
// upstream, all on loopback:
//
//	testdata/forward/              2025-11-25 client → 2026-07-28 upstream (bridge/forward)
//	testdata/reverse/              2026-07-28 client → 2025-11-25 upstream (bridge/reverse)
//	testdata/passthrough/legacy/   2025-11-25 client → 2025-11-25 upstream (bridge/passthrough)
//	testdata/passthrough/modern/   2026-07-28 client → 2026-07-28 upstream (bridge/passthrough)
//
// testdata/README.md describes the format. Run with -update to rewrite the client's "<"
// lines from what the bridge actually sent (review the diff before committing it).

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store"
	"github.com/taskbridge/taskbridge/store/sqlite"
)

var update = flag.Bool("update", false, "rewrite the client \"<\" lines of testdata/*/*.txtar from what the bridge sent")

// goldenWait bounds every wait of the runner: for a client message, for the upstream script
// to be used up, for open requests to be answered. Generous, for -race on a busy machine.
const goldenWait = 15 * time.Second

// goldenRoute is one directory of transcripts: who talks to whom.
type goldenRoute struct {
	dir            string
	modernClient   bool // the client speaks 2026-07-28 (else 2025-11-25, with a session)
	legacyUpstream bool // the upstream speaks 2025-11-25 (else 2026-07-28 + SEP-2663)
}

var goldenRoutes = []goldenRoute{
	{dir: "forward"},
	{dir: "reverse", modernClient: true, legacyUpstream: true},
	{dir: "passthrough/legacy", legacyUpstream: true},
	{dir: "passthrough/modern", modernClient: true},
}

func TestGolden(t *testing.T) {
	for _, rt := range goldenRoutes {
		files, err := filepath.Glob("../testdata/" + rt.dir + "/*.txtar")
		if err != nil || len(files) == 0 {
			t.Fatalf("no transcripts in ../testdata/%s (%v)", rt.dir, err)
		}
		for _, path := range files {
			t.Run(rt.dir+"/"+strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
				t.Parallel()
				runGolden(t, rt, path)
			})
		}
	}
}

// TestGoldenCoversEveryRoute: every route the door dispatches to has transcripts.
func TestGoldenCoversEveryRoute(t *testing.T) {
	dirs := map[bridge.Route]string{bridge.RouteForward: "forward", bridge.RouteReverse: "reverse",
		bridge.RouteLegacyPassThrough: "passthrough/legacy", bridge.RouteModernPassThrough: "passthrough/modern"}
	seen := map[bridge.Route]bool{}
	for _, d := range bridge.Routes() {
		if seen[d.Route] {
			continue
		}
		seen[d.Route] = true
		dir, ok := dirs[d.Route]
		if !ok {
			t.Errorf("route %s has no transcript directory in the golden runner", d.Route)
			continue
		}
		if files, _ := filepath.Glob("../testdata/" + dir + "/*.txtar"); len(files) == 0 {
			t.Errorf("route %s: no transcripts in testdata/%s", d.Route, dir)
		}
	}
}

// ---- the transcript file -------------------------------------------------------------

type transcript struct {
	path   string
	lines  []string // the file, kept for -update
	header string
	bridge string // the -- bridge -- section: JSON overrides of the bridge config
	up     []upStep
	client []clientLine
}

// upStep is one ">>" request pattern (subset match) and the "<<" reply to it.
type upStep struct {
	line   int
	expect any
	reply  string // JSON text, sent in the order written
}

// clientLine is a ">" message (or "> GET") the client sends, or a "<" message it must receive.
type clientLine struct {
	line    int // 0-based index into transcript.lines
	send    bool
	get     bool
	msg     any
	raw     string // msg as written, sent in that order
	comment string // a trailing "# …", kept by -update
}

// parseTranscript reads a txtar-like file: "-- name --" starts a section, text before the
// first one is the header; blank lines and "#" lines inside sections are comments.
func parseTranscript(path string) (*transcript, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	tr := &transcript{path: path, lines: strings.Split(string(b), "\n")}
	section := ""
	for i, ln := range tr.lines {
		if name, ok := strings.CutPrefix(ln, "-- "); ok && strings.HasSuffix(name, " --") {
			section = strings.TrimSuffix(name, " --")
			continue
		}
		s := strings.TrimSpace(ln)
		if section == "" {
			tr.header += ln + "\n"
			continue
		}
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		if err := tr.addLine(section, i, s); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
	}
	if !strings.HasPrefix(strings.TrimSpace(tr.header), "Pins down:") {
		return nil, fmt.Errorf("%s: the header must start with \"Pins down:\"", path)
	}
	for _, st := range tr.up {
		if st.reply == "" {
			return nil, fmt.Errorf("%s:%d: \">>\" without a \"<<\" reply", path, st.line+1)
		}
	}
	return tr, nil
}

func (tr *transcript) addLine(section string, i int, s string) error {
	switch {
	case section == "bridge":
		tr.bridge += s
		return nil
	case section == "upstream" && strings.HasPrefix(s, ">>"):
		v, _, _, err := parseJSONLine(s[2:])
		tr.up = append(tr.up, upStep{line: i, expect: v})
		return err
	case section == "upstream" && strings.HasPrefix(s, "<<"):
		if len(tr.up) == 0 || tr.up[len(tr.up)-1].reply != "" {
			return fmt.Errorf("\"<<\" without a \">>\" before it")
		}
		_, raw, _, err := parseJSONLine(s[2:])
		tr.up[len(tr.up)-1].reply = raw
		return err
	case section == "client" && strings.TrimSpace(s[1:]) == "GET" && s[0] == '>':
		tr.client = append(tr.client, clientLine{line: i, send: true, get: true})
		return nil
	case section == "client" && (s[0] == '>' || s[0] == '<'):
		v, raw, comment, err := parseJSONLine(s[1:])
		tr.client = append(tr.client, clientLine{line: i, send: s[0] == '>', msg: v, raw: raw, comment: comment})
		return err
	}
	return fmt.Errorf("unexpected line in section %q: %s", section, s)
}

// parseJSONLine decodes one JSON value (also returned as text), allowing a trailing
// "# comment".
func parseJSONLine(rest string) (v any, raw, comment string, err error) {
	rest = strings.TrimSpace(rest)
	dec := json.NewDecoder(strings.NewReader(rest))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, "", "", fmt.Errorf("bad JSON: %w", err)
	}
	raw = rest[:dec.InputOffset()]
	comment = strings.TrimSpace(rest[dec.InputOffset():])
	if comment != "" && !strings.HasPrefix(comment, "#") {
		return nil, "", "", fmt.Errorf("text after the JSON value: %q", comment)
	}
	return v, raw, comment, nil
}

// startsWithInitialize reports whether the client section opens the session itself.
func (tr *transcript) startsWithInitialize() bool {
	if len(tr.client) == 0 || !tr.client[0].send {
		return false
	}
	m, _ := tr.client[0].msg.(map[string]any)
	return m["method"] == "initialize"
}

// ---- running a transcript ------------------------------------------------------------

// bridgeSection is what a "-- bridge --" section may set.
type bridgeSection struct {
	ListPageSize   int   `json:"listPageSize"`
	PollFloorMs    int64 `json:"pollFloorMs"`
	HeartbeatMs    int64 `json:"heartbeatMs"`
	InputTimeoutMs int64 `json:"inputTimeoutMs"`
}

func runGolden(t *testing.T, rt goldenRoute, path string) {
	tr, err := parseTranscript(path)
	if err != nil {
		t.Fatal(err)
	}
	bs := bridgeSection{PollFloorMs: 50, HeartbeatMs: 60_000}
	if tr.bridge != "" {
		dec := json.NewDecoder(strings.NewReader(tr.bridge))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&bs); err != nil {
			t.Fatalf("%s: -- bridge -- section: %v", path, err)
		}
	}
	v := &vars{m: map[string]any{}}
	sc := newScript(tr, v)
	var up http.Handler = modernUpstream{sc}
	if rt.legacyUpstream {
		up = newLegacyUpstream(sc)
	}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "golden.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	engine := startGoldenEngine(t, rt, bs, st, upSrv.URL+"/mcp")
	mux := http.NewServeMux()
	mux.Handle("/mcp", mustDoor(t, bridge.DoorConfig{}, engine))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := newGoldenClient(srv.URL+"/mcp", v, rt.modernClient)
	t.Cleanup(c.close)

	if !rt.modernClient && !tr.startsWithInitialize() {
		if err := c.initialize(); err != nil {
			t.Fatal(err)
		}
	}
	rewritten := map[int]string{}
	ok := playClient(t, tr, c, rewritten)
	if ok {
		finish(t, tr, c, sc)
	}
	sc.report(t)
	if *update && len(rewritten) > 0 {
		for i, s := range rewritten {
			tr.lines[i] = s
		}
		if err := os.WriteFile(path, []byte(strings.Join(tr.lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// startGoldenEngine builds and starts the routes in front of the upstream at url, as
// "taskbridge serve" would for its era (bridge.NewForward or bridge.NewReverse).
func startGoldenEngine(t *testing.T, rt goldenRoute, bs bridgeSection, st store.Store, url string) bridge.Engine {
	ctx := context.Background()
	poll := bs.PollFloorMs
	heartbeat := time.Duration(bs.HeartbeatMs) * time.Millisecond
	input := time.Duration(bs.InputTimeoutMs) * time.Millisecond
	if rt.legacyUpstream {
		r, err := bridge.NewReverse(bridge.ReverseConfig{Upstream: legacy.NewClient(legacy.ClientOptions{URL: url}),
			Store: st, Logger: zerolog.Nop(), PollFloorMs: poll, InputTimeout: input})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(context.Background()) })
		return r
	}
	b, err := bridge.NewForward(forward.Config{Store: st, Upstream: sep2663.NewClient(sep2663.ClientOptions{URL: url}),
		Logger: zerolog.Nop(), PollFloorMs: poll, Heartbeat: heartbeat, ListPageSize: bs.ListPageSize, InputTimeout: input})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	return b
}

// playClient runs the client section; false when it had to stop at a failed line.
func playClient(t *testing.T, tr *transcript, c *goldenClient, rewritten map[int]string) bool {
	for _, ln := range tr.client {
		where := fmt.Sprintf("%s:%d", tr.path, ln.line+1)
		if !ln.send {
			got, diffs := c.expect(ln.msg)
			if got != nil && diffs != nil && *update {
				s := "< " + c.vars.rewrite(ln.msg, gjson.Parse(got.raw), "")
				if ln.comment != "" {
					s += " " + ln.comment
				}
				if s != strings.TrimSpace(tr.lines[ln.line]) {
					rewritten[ln.line] = s
				}
				continue
			}
			if diffs != nil {
				t.Errorf("%s: the client did not receive the expected message\n\t%s", where, strings.Join(diffs, "\n\t"))
				return false
			}
			continue
		}
		if ln.get {
			if err := c.openGet(); err != nil {
				t.Errorf("%s: %v", where, err)
				return false
			}
			continue
		}
		body, err := c.vars.subst(ln.raw)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			return false
		}
		m, _ := ln.msg.(map[string]any)
		_, hasID := m["id"]
		if m["method"] != nil && hasID {
			if m["method"] == "initialize" {
				c.mu.Lock()
				c.version = gjson.Get(body, "params.protocolVersion").Str
				c.mu.Unlock()
			}
			c.request([]byte(body), m["method"] == "initialize")
			continue
		}
		if err := c.post([]byte(body)); err != nil {
			t.Errorf("%s: %v", where, err)
			return false
		}
	}
	return true
}

// finish checks what a transcript implies beyond its lines: the upstream script was used
// up, every request was answered, and the client got nothing it did not expect.
func finish(t *testing.T, tr *transcript, c *goldenClient, up *script) {
	select {
	case <-up.done:
	case <-time.After(goldenWait):
		up.mu.Lock()
		t.Errorf("%s:%d: the bridge never sent the upstream request of this step", tr.path, tr.up[up.next].line+1)
		up.mu.Unlock()
	}
	answered := make(chan struct{})
	go func() { c.posts.Wait(); close(answered) }()
	select {
	case <-answered:
	case <-time.After(goldenWait):
		c.mu.Lock()
		for _, body := range c.open {
			t.Errorf("%s: request never answered: %s", tr.path, body)
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.pending {
		t.Errorf("%s: the client received a message the transcript does not expect: %s", tr.path, r.raw)
	}
}
