package verify

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/auth"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/sep2663"
)

// securityGate (hard): an authenticated context for task listing; a second principal
// cannot get, result, cancel or list the first one's tasks and its answers are the bytes
// of an unknown id; guessed ids; a forged related-task _meta; a revoked credential; no
// credential and no input answer in the logs.
func securityGate(ctx context.Context, r *run) {
	const g = "security"
	r.check(ctx, g, "authenticated task listing", func(context.Context) (Result, string) {
		if r.authn != nil {
			return Pass, "tasks and tasks/list are bound to the principal (" + r.who[0].name + ", " + r.who[1].name + ")"
		}
		if r.plan.AcceptSessionScopedListing {
			return Pass, "no authentication: tasks/list is scoped to each 2025-11-25 session (accepted by the plan: accept_session_scoped_listing)"
		}
		return Fail, "task listing without an authenticated context: the configuration has no auth section, so tasks are bound only to sessions; configure auth, or accept it in the plan (accept_session_scoped_listing: true)"
	})
	r.check(ctx, g, "input answers never logged", r.answerCanary) // answers.go
	t := r.tools.slow
	if t == nil {
		r.check(ctx, g, "second principal (2025-11-25)", func(context.Context) (Result, string) {
			return Skipped, "no task tool to make a task with"
		})
		return
	}
	var a *legacyClient
	var taskID string
	r.check(ctx, g, "second principal (2025-11-25)", func(ctx context.Context) (Result, string) {
		var err error
		if a, err = r.legacy(ctx, 0, withTasksCaps); err != nil {
			return Fail, r.who[0].name + ": " + err.Error()
		}
		b, err := r.legacy(ctx, 1, withTasksCaps)
		if err != nil {
			return Fail, r.who[1].name + ": " + err.Error()
		}
		id, _, res, err := a.createTask(ctx, *t)
		r.sent(1)
		if err != nil || res.Error != nil {
			return Fail, fmt.Sprintf("tools/call: %v %s", err, res.errText())
		}
		taskID = id
		unknown := randomID()
		var shown string
		for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
			theirs, err1 := b.call(ctx, m, map[string]any{"taskId": id})
			none, err2 := b.call(ctx, m, map[string]any{"taskId": unknown})
			if err1 != nil || err2 != nil {
				return Fail, fmt.Sprintf("%s: %v %v", m, err1, err2)
			}
			if theirs.Error == nil {
				return Fail, fmt.Sprintf("%s of %s's task answered %s a result: %.100s", m, r.who[0].name, r.who[1].name, theirs.Result)
			}
			// An answer may echo the id asked for (the TS SDK's "Task not found: <id>"):
			// the caller's own input, so it is compared with the id blanked.
			if !bytes.Equal(blank(theirs.Error, id), blank(none.Error, unknown)) || theirs.Status != none.Status {
				return Fail, fmt.Sprintf("%s: another principal's task answers %s (HTTP %d), an unknown id %s (HTTP %d)", m, theirs.Error, theirs.Status, none.Error, none.Status)
			}
			shown = none.errText()
		}
		res, err = b.call(ctx, "tasks/list", map[string]any{})
		if err != nil || res.Error != nil {
			return Fail, fmt.Sprintf("tasks/list: %v %s", err, res.errText())
		}
		if strings.Contains(string(res.Result), id) {
			return Fail, r.who[1].name + "'s tasks/list shows " + r.who[0].name + "'s task"
		}
		st, res, err := a.status(ctx, id)
		if err != nil || res.Error != nil || st == "cancelled" {
			return Fail, fmt.Sprintf("the owner's task after the other's cancel: %s %v %s", st, err, res.errText())
		}
		return Pass, fmt.Sprintf("get/result/cancel answer the unknown-id bytes (%s); list hides it; the owner still sees %s", shown, st)
	})
	r.check(ctx, g, "guessed ids", func(ctx context.Context) (Result, string) {
		if a == nil || taskID == "" {
			return Skipped, "no task was made"
		}
		refID := randomID()
		ref, err := a.call(ctx, "tasks/get", map[string]any{"taskId": refID})
		if err != nil || ref.Error == nil {
			return Fail, fmt.Sprintf("an unknown id: %v %.80s", err, ref.Result)
		}
		guesses := []string{mutate(taskID), taskID + "0", strings.ToUpper(taskID), "1", ""}
		for _, gid := range guesses {
			res, err := a.call(ctx, "tasks/get", map[string]any{"taskId": gid})
			if err != nil {
				return Fail, err.Error()
			}
			if res.Error == nil {
				return Fail, fmt.Sprintf("guessed id %q answered a task", gid)
			}
			if gid != "" && !bytes.Equal(blank(res.Error, gid), blank(ref.Error, refID)) {
				return Fail, fmt.Sprintf("guessed id %q answers %s, an unknown id %s", gid, res.Error, ref.Error)
			}
		}
		return Pass, fmt.Sprintf("%d near-miss ids: the unknown-id answer", len(guesses))
	})
	r.check(ctx, g, "forged related-task _meta", func(ctx context.Context) (Result, string) {
		return r.forgedRelatedTask(ctx, *t)
	})
	r.check(ctx, g, "second principal (2026-07-28)", func(ctx context.Context) (Result, string) {
		return r.modernIsolation(ctx, *t)
	})
	r.check(ctx, g, "revoked credential", func(ctx context.Context) (Result, string) {
		if !r.apiKeysRevocable() || a == nil || taskID == "" {
			return Skipped, "only with api_keys (verify then holds the keys it can revoke)"
		}
		return r.revoked(ctx, a, taskID)
	})
	if a != nil && taskID != "" { // the task ends before the next gate (it counts towards the caps)
		wctx, cancel := r.step(ctx)
		_, _ = waitLegacy(wctx, a, taskID, &trail{})
		cancel()
	}
	r.check(ctx, g, "credentials never logged", func(context.Context) (Result, string) {
		if r.o.Logs == nil {
			return Skipped, "the bridge's log is not available"
		}
		logs := r.o.Logs()
		for _, p := range r.who {
			for _, vs := range p.header {
				for _, v := range vs {
					secret := v[strings.LastIndexByte(v, ' ')+1:]
					if len(secret) >= 8 && bytes.Contains(logs, []byte(secret)) {
						return Fail, p.name + "'s credential appears in the bridge's log"
					}
				}
			}
		}
		if len(r.who[0].header) == 0 {
			return Skipped, "no credentials in use (no authentication)"
		}
		return Pass, fmt.Sprintf("neither principal's credential in %d bytes of debug log", len(logs))
	})
	r.check(ctx, g, "arguments never logged", r.argumentCanary)
}

// argumentCanary: the plan's arguments marked CanaryPlaceholder carried a secret on every
// call verify made so far (and, where the tool echoes them, in its results); the secret
// must not be in the bridge's log.
func (r *run) argumentCanary(context.Context) (Result, string) {
	if r.argCanaries == 0 {
		return Skipped, "the plan marks no argument with " + CanaryPlaceholder + " (docs/verify.md, the plan)"
	}
	if r.o.Logs == nil {
		return Skipped, "the bridge's log is not available"
	}
	logs := r.o.Logs()
	if bytes.Contains(logs, []byte(r.argCanary)) {
		return Fail, "a canary planted in a tool's arguments appears in the bridge's log"
	}
	return Pass, fmt.Sprintf("%d plan argument(s) carried a canary on every call; not in %d bytes of debug log", r.argCanaries, len(logs))
}

// modernIsolation: principal 2 asks for principal 1's 2026-07-28 task. The modern
// pass-through records each task's owner in the store (bridge/passthrough), so another
// principal's id must answer exactly like an unknown one and never reach the upstream.
func (r *run) modernIsolation(ctx context.Context, t Tool) (Result, string) {
	ma := newModernClient(r.url, r.hc, r.who[0].header)
	mb := newModernClient(r.url, r.hc, r.who[1].header)
	out, err := ma.CallTool(ctx, toolCallParams(t), sep2663.RequestMeta{}, nil)
	r.sent(1)
	if err != nil {
		return Fail, "tools/call: " + err.Error()
	}
	if out.Kind != sep2663.KindTask {
		return Skipped, "the tool answered without a task on the 2026-07-28 face"
	}
	_, errTheirs := mb.GetTask(ctx, out.Task.TaskID, sep2663.RequestMeta{})
	_, errNone := mb.GetTask(ctx, randomID(), sep2663.RequestMeta{})
	defer func() { _, _ = waitModern(ctx, ma, out.Task.TaskID, &trail{}) }()
	if errTheirs == nil {
		if r.authn == nil {
			return Skipped, "no authentication: 2026-07-28 tasks are the upstream's bearer handles"
		}
		return Fail, "tasks/get by " + r.who[1].name + " of " + r.who[0].name + "'s 2026-07-28 task answered a task"
	}
	if !sameError(errTheirs, errNone) {
		return Fail, fmt.Sprintf("another principal's task answers %v, an unknown id %v", errTheirs, errNone)
	}
	return Pass, "tasks/get of another principal's task answers the unknown-id error"
}

func sameError(a, b error) bool {
	ja, oka := a.(*jsonrpc.Error)
	jb, okb := b.(*jsonrpc.Error)
	if !oka || !okb {
		return false
	}
	x, _ := json.Marshal(ja)
	y, _ := json.Marshal(jb)
	return bytes.Equal(x, y)
}

// revoked removes principal 1's key: its next tasks/result must be refused (401), then
// the key set is restored.
func (r *run) revoked(ctx context.Context, a *legacyClient, id string) (Result, string) {
	var keys []auth.APIKey
	for _, p := range r.who[1:] {
		keys = append(keys, auth.APIKey{Key: strings.TrimPrefix(p.header.Get("Authorization"), "Bearer "), Principal: "verify-b"})
	}
	only, err := auth.New(auth.Config{APIKeys: keys})
	if err != nil {
		return Fail, err.Error()
	}
	eng := r.eng.Load()
	old := eng.SetAuth(only)
	defer eng.SetAuth(old)
	res, err := a.call(ctx, "tasks/result", map[string]any{"taskId": id})
	if err != nil {
		return Fail, err.Error()
	}
	if res.Status != http.StatusUnauthorized {
		return Fail, fmt.Sprintf("tasks/result with a revoked key: HTTP %d %s", res.Status, res.errText())
	}
	return Pass, "tasks/result with the revoked key: HTTP 401 " + gjson.GetBytes(res.Error, "message").Str
}

// blank replaces id in an answer by a placeholder.
func blank(answer []byte, id string) []byte {
	return bytes.ReplaceAll(answer, []byte(id), []byte("<id>"))
}

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// mutate changes the last character of id.
func mutate(id string) string {
	if id == "" {
		return "x"
	}
	last := id[len(id)-1]
	c := byte('0')
	if last == '0' {
		c = '1'
	}
	return id[:len(id)-1] + string(c)
}
