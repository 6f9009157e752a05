package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/sep2663"
)

// gateRun is one gate; gates runs them in this order (recovery last: it checks the
// upstream tools/call count of the whole run).
type gateRun struct {
	name string
	run  func(context.Context, *run)
}

var gates = []gateRun{
	{"contract", contractGate},
	{"compatibility", compatibilityGate},
	{"security", securityGate},
	{"cancellation", cancellationGate},
	{"load", loadGate},
	{"recovery", recoveryGate},
}

// check runs one check under the step timeout and records it.
func (r *run) check(ctx context.Context, gate, name string, f func(context.Context) (Result, string)) Result {
	sctx, cancel := r.step(ctx)
	defer cancel()
	start := time.Now()
	res, ev := f(sctx)
	r.rep.add(Check{Gate: gate, Check: name, Result: res, Evidence: ev, Seconds: time.Since(start).Round(time.Millisecond).Seconds()})
	return res
}

// toolInfo is what tools/list (2025-11-25 face) said, and the tools verify may call.
type toolInfo struct {
	support  map[string]string // tool → execution.taskSupport
	readOnly map[string]bool
	slow     *Tool // a tool to run as a task (plan, else a read-only tool that may be a task)
	quick    *Tool // a tool to call synchronously
	input    *Tool // the plan's tool that asks for input (nil: none)
	why      string
}

// legalNext says whether a task may go from status a to b (both revisions share the
// statuses): working ⇄ input_required, either to a terminal status, a terminal status
// never changes.
func legalNext(a, b string) bool {
	if a == b {
		return true
	}
	switch a {
	case "working", "input_required":
		return b == "working" || b == "input_required" || terminal(b)
	}
	return false
}

func terminal(s string) bool { return s == "completed" || s == "failed" || s == "cancelled" }

// trail collects the statuses observed for one task and the first illegal transition.
type trail struct {
	seen    []string
	illegal string
}

func (t *trail) add(s string) {
	if n := len(t.seen); n > 0 {
		if t.seen[n-1] == s {
			return
		}
		if t.illegal == "" && !legalNext(t.seen[n-1], s) {
			t.illegal = t.seen[n-1] + "→" + s
		}
	}
	t.seen = append(t.seen, s)
}

func (t *trail) String() string { return strings.Join(t.seen, "→") }

// waitLegacy polls tasks/get until the task is terminal (or ctx ends), recording statuses.
func waitLegacy(ctx context.Context, c *legacyClient, id string, t *trail) (string, error) {
	for {
		st, r, err := c.status(ctx, id)
		if err != nil {
			return "", err
		}
		if r.Error != nil {
			return "", fmt.Errorf("tasks/get: %s", r.errText())
		}
		t.add(st)
		if terminal(st) {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("still %s when the step timed out", st)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitModern is waitLegacy for the 2026-07-28 client.
func waitModern(ctx context.Context, c *sep2663.Client, id string, t *trail) (*sep2663.DetailedTask, error) {
	for {
		d, err := c.GetTask(ctx, id, sep2663.RequestMeta{})
		if err != nil {
			return nil, err
		}
		t.add(string(d.Status))
		if terminal(string(d.Status)) {
			return d, nil
		}
		select {
		case <-ctx.Done():
			return d, fmt.Errorf("still %s when the step timed out", d.Status)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// toolCallParams is a modern tools/call's params.
func toolCallParams(t Tool) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"name": t.Name, "arguments": t.args()})
	return b
}

// contractGate: initialize for each era, tools/list and taskSupport, the task lifecycle
// on both faces (create, get, result, list with pagination), legal transitions.
func contractGate(ctx context.Context, r *run) {
	const g = "contract"
	var lc *legacyClient
	r.check(ctx, g, "initialize 2025-11-25", func(ctx context.Context) (Result, string) {
		c := newLegacyClient(r.url, r.hc, r.who[0].header, withTasksCaps)
		res, err := c.initialize(ctx)
		if err != nil {
			return Fail, err.Error()
		}
		if res.Error != nil {
			return Fail, "initialize: " + res.errText()
		}
		lc = c
		v := gjson.GetBytes(res.Result, "protocolVersion").Str
		tasks := gjson.GetBytes(res.Result, "capabilities.tasks")
		if v != "2025-11-25" {
			return Fail, fmt.Sprintf("protocolVersion %q", v)
		}
		if !tasks.Get("requests.tools.call").Exists() {
			return Fail, "capabilities.tasks.requests.tools.call missing: " + tasks.Raw
		}
		si := gjson.GetBytes(res.Result, "serverInfo")
		r.rep.fact("legacy face", fmt.Sprintf("2025-11-25, serverInfo %s %s", si.Get("name").Str, si.Get("version").Str))
		return Pass, "protocolVersion 2025-11-25, capabilities.tasks " + tasks.Raw
	})
	r.check(ctx, g, "discover 2026-07-28", func(ctx context.Context) (Result, string) {
		d, err := newModernClient(r.url, r.hc, r.who[0].header).Discover(ctx)
		if err != nil {
			return Fail, "server/discover: " + err.Error()
		}
		if !d.Capabilities.HasExtension(sep2663.ExtensionTasks) {
			return Fail, "the tasks extension is not advertised to 2026-07-28 clients"
		}
		if si, ok := d.ServerInfo(); ok {
			r.rep.fact("modern face", fmt.Sprintf("2026-07-28, serverInfo %s %s", si.Name, si.Version))
		}
		return Pass, fmt.Sprintf("supportedVersions %v, extension %s", d.SupportedVersions, sep2663.ExtensionTasks)
	})
	if lc == nil {
		r.tools = &toolInfo{why: "initialize failed"}
		return
	}
	r.check(ctx, g, "tools/list taskSupport", func(ctx context.Context) (Result, string) {
		ti, ev, ok := r.listTools(ctx, lc)
		r.tools = ti
		if !ok {
			return Fail, ev
		}
		return Pass, ev
	})
	if r.tools == nil {
		r.tools = &toolInfo{why: "tools/list failed"}
	}
	r.check(ctx, g, "task lifecycle 2025-11-25", func(ctx context.Context) (Result, string) {
		return r.legacyLifecycle(ctx, lc)
	})
	r.check(ctx, g, "task lifecycle 2026-07-28", func(ctx context.Context) (Result, string) {
		return r.modernLifecycle(ctx)
	})
	r.check(ctx, g, "tasks/list pagination", func(ctx context.Context) (Result, string) {
		return r.listPagination(ctx, lc)
	})
	r.check(ctx, g, "expired ttl → -32602", func(ctx context.Context) (Result, string) {
		return r.expiredTTL(ctx, lc)
	})
}

// listTools reads tools/list through the 2025-11-25 face and picks the tools to call.
func (r *run) listTools(ctx context.Context, lc *legacyClient) (*toolInfo, string, bool) {
	ti := &toolInfo{support: map[string]string{}, readOnly: map[string]bool{}}
	res, err := lc.call(ctx, "tools/list", map[string]any{})
	if err != nil || res.Error != nil {
		return ti, fmt.Sprintf("tools/list: %v %s", err, res.errText()), false
	}
	counts := map[string]int{}
	var bad []string
	var roTask, roSync []string
	noRequired := map[string]bool{}
	for _, t := range gjson.GetBytes(res.Result, "tools").Array() {
		name := t.Get("name").Str
		ts := t.Get("execution.taskSupport").Str
		if ts == "" {
			ts = "forbidden" // absent means forbidden (2025-11-25)
		}
		if ts != "forbidden" && ts != "optional" && ts != "required" {
			bad = append(bad, name+"="+ts)
		}
		ti.support[name] = ts
		counts[ts]++
		ti.readOnly[name] = t.Get("annotations.readOnlyHint").Bool()
		noRequired[name] = len(t.Get("inputSchema.required").Array()) == 0
		if ti.readOnly[name] && noRequired[name] {
			if ts == "forbidden" {
				roSync = append(roSync, name)
			} else {
				roTask = append(roTask, name)
			}
		}
	}
	ti.slow, ti.quick, ti.input = r.plan.Tools.Slow, r.plan.Tools.Quick, r.plan.Tools.Input
	if ti.slow == nil && len(roTask) > 0 {
		ti.slow = &Tool{Name: roTask[0]}
	}
	if ti.quick == nil && len(roSync) > 0 {
		ti.quick = &Tool{Name: roSync[0]}
	}
	var parts []string
	for _, k := range sortedKeys(counts) {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	r.rep.fact("tools", fmt.Sprintf("%d (%s)", len(ti.support), strings.Join(parts, ", ")))
	if ti.slow != nil {
		r.rep.fact("task tool", ti.slow.Name)
	}
	if ti.quick != nil {
		r.rep.fact("sync tool", ti.quick.Name)
	}
	if ti.input != nil {
		r.rep.fact("input tool", ti.input.Name)
	}
	if len(bad) > 0 {
		return ti, "invalid execution.taskSupport: " + strings.Join(bad, ", "), false
	}
	for _, t := range []*Tool{ti.slow, ti.quick, ti.input} {
		if t != nil && ti.support[t.Name] == "" {
			return ti, fmt.Sprintf("the plan's tool %q is not in tools/list", t.Name), false
		}
	}
	return ti, "taskSupport " + strings.Join(parts, ", "), true
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// legacyLifecycle: create, get, result (with the related-task _meta), get after result
// (the terminal status holds).
func (r *run) legacyLifecycle(ctx context.Context, lc *legacyClient) (Result, string) {
	t := r.tools.slow
	if t == nil {
		return Skipped, "no task tool: the plan names no slow tool and no read-only tool may run as a task"
	}
	id, st, res, err := lc.createTask(ctx, *t)
	r.sent(1)
	if err != nil || res.Error != nil {
		return Fail, fmt.Sprintf("tools/call %s with params.task: %v %s", t.Name, err, res.errText())
	}
	tr := &trail{}
	tr.add(st)
	out, err := lc.call(ctx, "tasks/result", map[string]any{"taskId": id})
	if err != nil || out.Error != nil {
		return Fail, fmt.Sprintf("tasks/result: %v %s", err, out.errText())
	}
	if rel := gjson.GetBytes(out.Result, `_meta.io\.modelcontextprotocol/related-task.taskId`).Str; rel != id {
		return Fail, fmt.Sprintf("tasks/result carries related-task %q, want the task's id", rel)
	}
	final, err := waitLegacy(ctx, lc, id, tr)
	if err != nil {
		return Fail, err.Error()
	}
	time.Sleep(300 * time.Millisecond) // a terminal status must hold
	if again, _, _ := lc.status(ctx, id); again != "" {
		tr.add(again)
	}
	if tr.illegal != "" {
		return Fail, "illegal transition " + tr.illegal + " (" + tr.String() + ")"
	}
	r.baseline["legacy"] = final
	return Pass, fmt.Sprintf("%s: %s; result %d bytes; final %s", t.Name, tr, len(out.Result), final)
}

// modernLifecycle: the same task through the 2026-07-28 face.
func (r *run) modernLifecycle(ctx context.Context) (Result, string) {
	t := r.tools.slow
	if t == nil {
		return Skipped, "no task tool: the plan names no slow tool and no read-only tool may run as a task"
	}
	mc := newModernClient(r.url, r.hc, r.who[0].header)
	out, err := mc.CallTool(ctx, toolCallParams(*t), sep2663.RequestMeta{}, nil)
	r.sent(1)
	if err != nil {
		return Fail, "tools/call: " + err.Error()
	}
	if out.Kind != sep2663.KindTask {
		if r.plan.Tools.Slow == nil {
			return Skipped, fmt.Sprintf("%s (chosen without a plan) answered %s: the upstream runs it synchronously; name a slow tool in the plan", t.Name, out.Kind)
		}
		return Fail, fmt.Sprintf("the plan's slow tool %s with the tasks extension answered %s, not a task", t.Name, out.Kind)
	}
	tr := &trail{}
	tr.add(string(out.Task.Status))
	d, err := waitModern(ctx, mc, out.Task.TaskID, tr)
	if err != nil {
		return Fail, fmt.Sprintf("tasks/get %s: %v (%s)", out.Task.TaskID, err, tr)
	}
	if d.Status == sep2663.TaskStatus("completed") && len(d.Result) == 0 {
		return Fail, "completed without a result"
	}
	time.Sleep(300 * time.Millisecond)
	if again, err := mc.GetTask(ctx, out.Task.TaskID, sep2663.RequestMeta{}); err == nil {
		tr.add(string(again.Status))
	} else {
		return Fail, "tasks/get after the end: " + err.Error()
	}
	if tr.illegal != "" {
		return Fail, "illegal transition " + tr.illegal + " (" + tr.String() + ")"
	}
	r.baseline["modern"] = string(d.Status)
	return Pass, fmt.Sprintf("%s: %s; result %d bytes", t.Name, tr, len(d.Result))
}

// listPagination follows tasks/list's cursors; every task this session made appears
// exactly once.
func (r *run) listPagination(ctx context.Context, lc *legacyClient) (Result, string) {
	t := r.tools.slow
	if t == nil {
		return Skipped, "no task tool"
	}
	want := map[string]bool{}
	for range 3 {
		id, _, res, err := lc.createTask(ctx, *t)
		r.sent(1)
		if err != nil || res.Error != nil {
			return Fail, fmt.Sprintf("tools/call: %v %s", err, res.errText())
		}
		want[id] = true
	}
	seen := map[string]int{}
	pages := 0
	cursor := ""
	for {
		p := map[string]any{}
		if cursor != "" {
			p["cursor"] = cursor
		}
		res, err := lc.call(ctx, "tasks/list", p)
		if err != nil || res.Error != nil {
			return Fail, fmt.Sprintf("tasks/list: %v %s", err, res.errText())
		}
		pages++
		for _, tk := range gjson.GetBytes(res.Result, "tasks").Array() {
			seen[tk.Get("taskId").Str]++
		}
		cursor = gjson.GetBytes(res.Result, "nextCursor").Str
		if cursor == "" || pages > 1000 {
			break
		}
	}
	for id := range want {
		if seen[id] != 1 {
			return Fail, fmt.Sprintf("task %s listed %d times over %d pages", short(id), seen[id], pages)
		}
	}
	for id, n := range seen {
		if n > 1 {
			return Fail, fmt.Sprintf("task %s listed %d times", short(id), n)
		}
	}
	for id := range want { // let them finish: they count towards the caps of later gates
		_, _ = waitLegacy(ctx, lc, id, &trail{})
	}
	return Pass, fmt.Sprintf("%d tasks over %d page(s), each once", len(seen), pages)
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8] + "…"
	}
	return id
}
