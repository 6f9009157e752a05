package forward_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

// slowCreates holds every upstream tools/call for d before the fixture sees it: an
// upstream whose creates take d.
func slowCreates(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tools/call" {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// TestBackpressure (design §9): with max_upstream_inflight N, 10×N simultaneous task
// creates against an upstream that takes 10 s to answer a create give N upstream
// executions and 9×N "overloaded, retry after" refusals (-32011, data.retryAfterMs), each
// back before any admitted create has been answered; the store holds exactly the N
// admitted tasks and no record with an unknown outcome.
func TestBackpressure(t *testing.T) {
	const n = 3
	fx := fixture.New(fixture.Options{Scale: 0.1, PollIntervalMs: 100})
	up := httptest.NewServer(slowCreates(fx, 10*time.Second))
	t.Cleanup(func() { up.CloseClientConnections(); up.Close(); fx.Close() })
	e := &env{t: t, fx: fx, upURL: up.URL + "/mcp", dbPath: filepath.Join(t.TempDir(), "tb.db")}
	e.start(envConfig{Config: forward.Config{Logger: zerolog.Nop(), CreateTimeout: time.Minute, NoUpstreamPush: true},
		Policy: bridge.Policy{MaxInflight: n}})
	c := e.client()

	type outcome struct {
		err error
		at  time.Time
	}
	out := make([]outcome, 10*n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			_, err := c.Call(ctx, "tools/call", raw(`{"name":"slow_compute","arguments":{"seconds":0},"task":{}}`))
			out[i] = outcome{err, time.Now()}
		}()
	}
	close(start)
	wg.Wait()

	var admitted, refused int
	var firstAdmitted, lastRefused time.Time
	for _, o := range out {
		var je *jsonrpc.Error
		switch {
		case o.err == nil:
			admitted++
			if firstAdmitted.IsZero() || o.at.Before(firstAdmitted) {
				firstAdmitted = o.at
			}
		case errors.As(o.err, &je) && je.Code == jsonrpc.CodeOverloaded && gjson.GetBytes(je.Data, "reason").Str == "overloaded":
			refused++
			if gjson.GetBytes(je.Data, "retryAfterMs").Int() <= 0 {
				t.Errorf("overloaded without retryAfterMs: %s", je.Data)
			}
			if o.at.After(lastRefused) {
				lastRefused = o.at
			}
		default:
			t.Errorf("create: %v", o.err)
		}
	}
	if admitted != n || refused != 9*n {
		t.Fatalf("%d admitted, %d refused; want %d and %d", admitted, refused, n, 9*n)
	}
	if !lastRefused.Before(firstAdmitted) {
		t.Errorf("a refusal came back after an admitted create was answered: refusals must not wait for the upstream")
	}
	if got := fx.Stats().Executions["slow_compute"]; got != n {
		t.Errorf("upstream executions: %d, want %d", got, n)
	}
	recs, err := e.st.QueryTasks(context.Background(), store.TaskQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n {
		t.Errorf("the store holds %d task records, want the %d admitted", len(recs), n)
	}
	for _, r := range recs {
		if r.Outcome == record.OutcomeUnknown || r.UpstreamTaskID == "" {
			t.Errorf("record %s: outcome %s, upstream id %q", r.ID, r.Outcome, r.UpstreamTaskID)
		}
	}
	if e.gate.Inflight() != 0 {
		t.Errorf("%d upstream slots still held after every create answered", e.gate.Inflight())
	}
}
