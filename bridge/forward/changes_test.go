package forward_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
)

func withListChanged(_ *envConfig, fo *fixture.Options) { fo.ListChanged = true }

// waitNote waits for a notification of method on c (any of its streams); the params of
// the first one.
func waitNote(t *testing.T, c *legacyclient.Client, method string, within time.Duration) (gjson.Result, bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, m := range c.Notifications() {
			if m.Method == method {
				return gjson.ParseBytes(m.Params), true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return gjson.Result{}, false
}

// TestChangeNotificationsReachTheGetStream (issue 16 item 8): initialize advertises the
// upstream's tools.listChanged and resources.subscribe, and both are delivered: add_tool
// upstream reaches every session's GET stream as notifications/tools/list_changed (without
// the listen's subscriptionId), and bump_resource reaches, as
// notifications/resources/updated, only the session that subscribed to the URI and not
// after it unsubscribed.
func TestChangeNotificationsReachTheGetStream(t *testing.T) {
	e := newEnv(t, withListChanged)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, other := legacyclient.New(e.url), e.client()
	res, err := a.Initialize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	caps := gjson.GetBytes(res, "capabilities")
	if !caps.Get("tools.listChanged").Bool() || !caps.Get("resources.subscribe").Bool() {
		t.Fatalf("capabilities = %s, want tools.listChanged and resources.subscribe", caps.Raw)
	}
	if caps.Get("resources.listChanged").Exists() || caps.Get("prompts").Exists() {
		t.Errorf("capabilities = %s: more than the upstream offers", caps.Raw)
	}
	if err := a.OpenGetStream(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.OpenGetStream(ctx); err != nil {
		t.Fatal(err)
	}
	opened := listens(e)
	call(t, a, "resources/subscribe", map[string]string{"uri": fixture.CounterURI})
	waitListen(t, e, opened+1)

	call(t, a, "tools/call", map[string]any{"name": "add_tool", "arguments": map[string]string{"name": "added"}})
	for _, c := range []*legacyclient.Client{a, other} {
		p, ok := waitNote(t, c, "notifications/tools/list_changed", 5*time.Second)
		if !ok {
			t.Fatalf("session %s got no notifications/tools/list_changed: %v", c.SessionID(), c.Notifications())
		}
		if p.Get("_meta").Exists() {
			t.Errorf("list_changed carries the listen's _meta: %s", p.Raw)
		}
	}
	list := call(t, other, "tools/list", nil)
	if !list.Get(`tools.#(name=="added")`).Exists() {
		t.Errorf("tools/list after list_changed lacks the added tool: %s", list.Raw)
	}

	call(t, a, "tools/call", map[string]any{"name": "bump_resource", "arguments": map[string]any{}})
	p, ok := waitNote(t, a, "notifications/resources/updated", 5*time.Second)
	if !ok || p.Get("uri").String() != fixture.CounterURI {
		t.Fatalf("subscriber got %v (%s), want resources/updated for %s", ok, p.Raw, fixture.CounterURI)
	}
	if _, ok := waitNote(t, other, "notifications/resources/updated", 300*time.Millisecond); ok {
		t.Error("a session that did not subscribe got resources/updated")
	}

	opened = listens(e)
	call(t, a, "resources/unsubscribe", map[string]string{"uri": fixture.CounterURI})
	before := count(a, "notifications/resources/updated")
	waitListen(t, e, opened+1) // re-opened without the URI
	call(t, a, "tools/call", map[string]any{"name": "bump_resource", "arguments": map[string]any{}})
	time.Sleep(300 * time.Millisecond)
	if n := count(a, "notifications/resources/updated"); n != before {
		t.Errorf("resources/updated after unsubscribe: %d, want %d", n, before)
	}
}

// TestSubscribeAnswersOnceCovered: resources/subscribe answers only when a listen asking
// for its URI is acknowledged upstream, so a change made right after the answer arrives
// (the listen is re-opened with the new filter, which took a debounce and a round trip that
// a change made at once used to fall into).
func TestSubscribeAnswersOnceCovered(t *testing.T) {
	e := newEnv(t, withListChanged)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := legacyclient.New(e.url)
	if _, err := a.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.OpenGetStream(ctx); err != nil {
		t.Fatal(err)
	}
	waitListen(t, e, 1) // open, asking for list changes only
	for i := range 3 {
		uri := fixture.CounterURI
		if i > 0 { // the counter is covered already: a new URI makes the filter change again
			call(t, a, "resources/subscribe", map[string]string{"uri": fmt.Sprintf("fixture://other-%d", i)})
		} else {
			call(t, a, "resources/subscribe", map[string]string{"uri": uri})
		}
		before := count(a, "notifications/resources/updated")
		call(t, a, "tools/call", map[string]any{"name": "bump_resource", "arguments": map[string]any{}})
		deadline := time.Now().Add(3 * time.Second)
		for count(a, "notifications/resources/updated") == before {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no resources/updated for a change made right after resources/subscribe answered", i)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// count is how many notifications of method c has seen.
func count(c *legacyclient.Client, method string) (n int) {
	for _, m := range c.Notifications() {
		if m.Method == method {
			n++
		}
	}
	return n
}

// waitListen waits until the upstream has had n subscriptions/listen requests at least.
func waitListen(t *testing.T, e *env, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for listens(e) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the bridge opened %d listens upstream, want %d", listens(e), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // past the debounce: the filter in force is the newest
}

// listens is how many subscriptions/listen the upstream has had.
func listens(e *env) int { return e.fx.Stats().Methods["subscriptions/listen"] }

// TestResourcesSubscribeBounds: bad URIs get -32602, and a session may hold at most 64.
func TestResourcesSubscribeBounds(t *testing.T) {
	e := newEnv(t, withListChanged)
	c := e.client()
	for _, bad := range []any{map[string]any{}, map[string]any{"uri": 7}, map[string]any{"uri": ""}} {
		if err := callErr(t, c, "resources/subscribe", bad); asRPC(t, err).Code != -32602 {
			t.Errorf("subscribe %v: %v, want -32602", bad, err)
		}
	}
	for i := range 64 {
		call(t, c, "resources/subscribe", map[string]string{"uri": "fixture://r" + string(rune('a'+i%26)) + string(rune('a'+i/26))})
	}
	if err := callErr(t, c, "resources/subscribe", map[string]string{"uri": "fixture://one-more"}); asRPC(t, err).Code != -32602 {
		t.Errorf("65th subscription: %v, want -32602", err)
	}
}

// TestNoChangesWithoutTheUpstreamOffer: an upstream that advertises neither listChanged
// nor subscribe gets no listen for them, initialize advertises neither, and
// resources/subscribe is -32601. With NoUpstreamPush the same holds for an upstream that
// offers them.
func TestNoChangesWithoutTheUpstreamOffer(t *testing.T) {
	for name, opt := range map[string]envOpt{
		"upstream offers none": func(*envConfig, *fixture.Options) {},
		"NoUpstreamPush": func(c *envConfig, fo *fixture.Options) {
			fo.ListChanged = true
			c.Config = withNoPush(c.Config)
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, opt)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c := legacyclient.New(e.url)
			res, err := c.Initialize(ctx)
			if err != nil {
				t.Fatal(err)
			}
			caps := gjson.GetBytes(res, "capabilities")
			if caps.Get("tools.listChanged").Exists() || caps.Get("resources.subscribe").Exists() {
				t.Errorf("capabilities = %s advertise what is not delivered", caps.Raw)
			}
			if err := c.OpenGetStream(ctx); err != nil {
				t.Fatal(err)
			}
			if err := callErr(t, c, "resources/subscribe", map[string]string{"uri": fixture.CounterURI}); asRPC(t, err).Code != -32601 {
				t.Errorf("resources/subscribe: %v, want -32601", err)
			}
			time.Sleep(200 * time.Millisecond)
			if n := e.fx.Stats().Methods["subscriptions/listen"]; n != 0 {
				t.Errorf("%d listens upstream, want none", n)
			}
		})
	}
}

func withNoPush(c forward.Config) forward.Config { c.NoUpstreamPush = true; return c }

// TestLogMessagesReachTheRequest (issue 16 item 8): after logging/setLevel, the session's
// level travels as the per-request logLevel, and the notifications/message the upstream
// sends within a request reach the legacy client on that request's stream; without
// setLevel the upstream is sent no level and sends none.
func TestLogMessagesReachTheRequest(t *testing.T) {
	e := newEnv(t, func(_ *envConfig, fo *fixture.Options) { fo.Logging = true })
	quiet, loud := e.client(), e.client()
	call(t, loud, "logging/setLevel", map[string]string{"level": "info"})
	for _, c := range []*legacyclient.Client{quiet, loud} {
		res := call(t, c, "tools/call", map[string]any{"name": "log_note", "arguments": map[string]string{"text": "hello log"}})
		if res.Get("content.0.text").Str != "logged: hello log" {
			t.Fatalf("log_note answered %s", res.Raw)
		}
	}
	if n := count(quiet, "notifications/message"); n != 0 {
		t.Errorf("a session without setLevel got %d log messages", n)
	}
	p, ok := waitNote(t, loud, "notifications/message", time.Second)
	if !ok || p.Get("data").Str != "hello log" || p.Get("level").Str != "info" {
		t.Errorf("after setLevel: %v %s, want the upstream's notifications/message", ok, p.Raw)
	}
}

// TestForwardAdvertisedIsDelivered: every listChanged/subscribe initialize advertises is
// delivered to the session's GET stream (a capability advertised with no way to deliver it
// fails here).
func TestForwardAdvertisedIsDelivered(t *testing.T) {
	e := newEnv(t, withListChanged)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := legacyclient.New(e.url)
	res, err := c.Initialize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.OpenGetStream(ctx); err != nil {
		t.Fatal(err)
	}
	triggers := map[string]func() string{
		"tools.listChanged": func() string {
			call(t, c, "tools/call", map[string]any{"name": "add_tool", "arguments": map[string]string{"name": "via_trigger"}})
			return "notifications/tools/list_changed"
		},
		"resources.subscribe": func() string {
			opened := listens(e)
			call(t, c, "resources/subscribe", map[string]string{"uri": fixture.CounterURI})
			waitListen(t, e, opened+1) // re-opened with the URI
			call(t, c, "tools/call", map[string]any{"name": "bump_resource", "arguments": map[string]any{}})
			return "notifications/resources/updated"
		},
	}
	caps := gjson.GetBytes(res, "capabilities")
	waitListen(t, e, 1)
	n := 0
	for _, key := range []string{"tools.listChanged", "prompts.listChanged", "resources.listChanged", "resources.subscribe"} {
		if !caps.Get(key).Bool() {
			continue
		}
		trigger, ok := triggers[key]
		if !ok {
			t.Errorf("initialize advertises %s, which this test cannot trigger: is it delivered?", key)
			continue
		}
		n++
		want := trigger()
		if _, ok := waitNote(t, c, want, 5*time.Second); !ok {
			t.Errorf("%s advertised, but no %s reached the GET stream", key, want)
		}
	}
	if n == 0 {
		t.Fatal("initialize advertises no listChanged/subscribe: nothing was checked")
	}
}
