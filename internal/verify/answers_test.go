package verify

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/internal/auth"
	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/metrics"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store/sqlite"
)

// lockedLog is a bridge's debug log in a test.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedLog) Bytes() []byte { l.mu.Lock(); defer l.mu.Unlock(); return bytes.Clone(l.b.Bytes()) }

// testEngine is a forward bridge behind its door; leaky logs every request body it gets
// (a deliberately faulty bridge).
type testEngine struct {
	*bridge.Door
	b     *bridge.Forward
	leaky bool
	log   zerolog.Logger
}

func (e *testEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if e.leaky && r.Body != nil {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		e.log.Debug().Bytes("body", body).Msg("request")
	}
	e.Door.ServeHTTP(w, r)
}

func (e *testEngine) Close(ctx context.Context) error { return e.b.Close(ctx) }

// TestAnswerCanary (issue 19): with the plan's input tool (the fixture's multi_input: two
// elicitations), "input answers never logged" passes against an honest bridge, and fails
// against one that logs request bodies at debug level; without an input tool it is skipped
// with the reason. "arguments never logged" goes the same way with the quick tool's
// argument marked ${canary} (greet echoes it in its result too), and is skipped without one.
func TestAnswerCanary(t *testing.T) {
	fx := fixture.New(fixture.Options{Scale: 0.1, PollIntervalMs: 100})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	marked := &Tool{Name: "greet", Arguments: map[string]any{"name": "x-" + CanaryPlaceholder}}
	for _, c := range []struct {
		name  string
		input *Tool
		quick *Tool
		leaky bool
		want  Result
	}{
		{"honest", &Tool{Name: "multi_input"}, marked, false, Pass},
		{"leaky", &Tool{Name: "multi_input"}, marked, true, Fail},
		{"no input tool", nil, &Tool{Name: "greet", Arguments: map[string]any{"name": "verify"}}, false, Skipped},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "v.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			logs, m := &lockedLog{}, metrics.New("test")
			log := zerolog.New(logs).Level(zerolog.DebugLevel)
			start := func(ctx context.Context, a auth.Authenticator) (Engine, error) {
				fb, err := bridge.NewForward(forward.Config{Upstream: sep2663.NewClient(sep2663.ClientOptions{URL: up.URL + "/mcp"}),
					Store: st, Logger: log, PollFloorMs: 100, Metrics: m})
				if err != nil {
					return nil, err
				}
				if err := fb.Start(ctx); err != nil {
					return nil, err
				}
				door, err := bridge.NewDoor(bridge.DoorConfig{Logger: log, Auth: a}, fb)
				if err != nil {
					return nil, err
				}
				return &testEngine{Door: door, b: fb, leaky: c.leaky, log: log}, nil
			}
			plan := &Plan{StepTimeout: 20 * time.Second}
			plan.Tools.Input, plan.Tools.Quick = c.input, c.quick
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			rep, err := Run(ctx, Options{Start: start, Metrics: m, Logs: logs.Bytes, Plan: plan, Store: st, Retention: 720 * time.Hour,
				Auth: auth.Config{APIKeys: []auth.APIKey{{Key: "unused-0123456789", Principal: "x"}}}})
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"input answers never logged", "arguments never logged"} {
				found := false
				for _, ch := range rep.Checks {
					if ch.Gate == "security" && ch.Check == name {
						found = true
						if ch.Result != c.want {
							t.Errorf("%s: %s: %s (%s), want %s", c.name, name, ch.Result, ch.Evidence, c.want)
						}
					}
				}
				if !found {
					t.Errorf("no check %q in %+v", name, rep.Checks)
				}
			}
		})
	}
}
