package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/internal/config"
	"github.com/taskbridge/taskbridge/internal/redact"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

const tasksUsage = `usage:
  taskbridge tasks list [--principal P] [--status S] [--session ID] [--limit N] [--json]
  taskbridge tasks show ID [--json]
  taskbridge tasks reconcile ID --outcome succeeded|failed|cancelled [--note TEXT]

The store comes from --store, TASKBRIDGE_STORE or the --config file (as for serve).
`

// cmdTasks reads (and, for reconcile, settles) task records in the store. It needs no
// running bridge: any replica's store will do.
func cmdTasks(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, tasksUsage)
		return errors.New("tasks: want list, show or reconcile")
	}
	switch args[0] {
	case "list":
		return tasksList(ctx, args[1:], stdout, stderr)
	case "show":
		return tasksShow(ctx, args[1:], stdout, stderr)
	case "reconcile":
		return tasksReconcile(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, tasksUsage)
		return nil
	}
	fmt.Fprint(stderr, tasksUsage)
	return fmt.Errorf("tasks: unknown subcommand %q", args[0])
}

// storeFlags registers --config, --store and keys on fs and returns a func opening the
// store with access after parsing (warning on stderr about misspelled TASKBRIDGE_*
// variables first).
func storeFlags(fs *flag.FlagSet, access storeAccess, stderr io.Writer, keys ...string) func(context.Context) (store.Store, *config.Config, error) {
	l := config.RegisterKeys(fs, append([]string{"store"}, keys...)...)
	return func(ctx context.Context) (store.Store, *config.Config, error) {
		warnUnknownEnv(stderr, os.Environ())
		cfg, err := l.Load(os.Getenv)
		if err != nil {
			return nil, nil, err
		}
		st, err := openStoreAs(ctx, cfg.Store, access)
		if err != nil {
			return nil, nil, err
		}
		return st, cfg, nil
	}
}

// storeNote is the help paragraph of the tasks commands.
const storeNote = "The store comes from --store, TASKBRIDGE_STORE or the --config file (as for serve)."

// ownerOf turns --principal into the record owner: "principal:TENANT/ID"; a bare ID means
// the empty tenant.
func ownerOf(p string) string {
	if p == "" {
		return ""
	}
	if !strings.Contains(p, "/") {
		p = "/" + p
	}
	return "principal:" + p
}

func tasksList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tasks list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := command{name: "tasks list", synopsis: "tasks list [--principal P] [--status S] [--session ID] [--limit N] [--json]",
		about: "Lists task records, newest first, read-only. " + storeNote, keys: []string{"store"}}
	open := storeFlags(fs, storeReadOnly, stderr)
	principal := fs.String("principal", "", "only this principal's tasks (TENANT/ID, or ID for no tenant)")
	status := fs.String("status", "", "only tasks in this status: working, input_required, completed, failed, cancelled")
	session := fs.String("session", "", "only tasks created in this session")
	limit := fs.Int("limit", 100, "at most this many tasks, newest first (0: all)")
	asJSON := fs.Bool("json", false, "one JSON object per line")
	if _, err := parseArgs(fs, c, args, stdout); err != nil {
		return err
	}
	switch record.Status(*status) {
	case "", record.StatusWorking, record.StatusInputRequired, record.StatusCompleted, record.StatusFailed, record.StatusCancelled:
	default:
		return fmt.Errorf("tasks list: --status %q: want working, input_required, completed, failed or cancelled", *status)
	}
	st, _, err := open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	ts, err := st.QueryTasks(ctx, store.TaskQuery{Owner: ownerOf(*principal), Status: record.Status(*status), SessionID: *session, Limit: *limit})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, t := range ts {
			if err := enc.Encode(taskView(t)); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tOUTCOME\tMODE\tTOOL\tOWNER\tCREATED\tUPDATED")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", termSafe(t.ID), t.Status, t.Outcome, t.Mode, termSafe(t.Tool), termSafe(t.Owner),
			t.CreatedAt.Format(time.RFC3339), t.LastUpdatedAt.Format(time.RFC3339))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(ts) == 0 {
		fmt.Fprintln(stderr, "no tasks match")
	}
	return nil
}

// view is what the CLI shows of a record: everything but the payloads, which are reduced
// to their size and hash (results can hold personal data; the audit needs only identity).
type view struct {
	ID             string    `json:"id"`
	Owner          string    `json:"owner"`
	SessionID      string    `json:"sessionId"`
	RequestID      string    `json:"requestId,omitempty"`
	IdempotencyKey string    `json:"idempotencyKey,omitempty"`
	Origin         string    `json:"origin"`
	UpstreamTaskID string    `json:"upstreamTaskId,omitempty"`
	Mode           string    `json:"mode"`
	Tool           string    `json:"tool"`
	ArgsHash       string    `json:"argsHash"`
	Status         string    `json:"status"`
	StatusMessage  string    `json:"statusMessage,omitempty"`
	Outcome        string    `json:"outcome"`
	OutcomeDetail  string    `json:"outcomeDetail,omitempty"`
	CreatedAt      time.Time `json:"createdAt"`
	LastUpdatedAt  time.Time `json:"lastUpdatedAt"`
	TTLMs          *int64    `json:"ttlMs"`
	ExpiresAt      string    `json:"expiresAt,omitempty"`
	PollIntervalMs int64     `json:"pollIntervalMs"`
	ResultBytes    int       `json:"resultBytes"`
	ResultSHA256   string    `json:"resultSha256,omitempty"`
	ErrorCode      *int64    `json:"errorCode,omitempty"`
	ErrorMessage   string    `json:"errorMessage,omitempty"`
	Version        int64     `json:"version"`
}

func taskView(t *record.Task) view {
	v := view{ID: t.ID, Owner: t.Owner, SessionID: t.SessionID, RequestID: t.RequestID, IdempotencyKey: t.IdempotencyKey,
		Origin: redact.URL(t.Origin), UpstreamTaskID: t.UpstreamTaskID, Mode: string(t.Mode), Tool: t.Tool, ArgsHash: t.ArgsHash,
		// Rows written before redaction existed may quote a URL with credentials: shown redacted.
		Status: string(t.Status), StatusMessage: redact.Text(t.StatusMessage), Outcome: string(t.Outcome), OutcomeDetail: redact.Text(t.OutcomeDetail),
		CreatedAt: t.CreatedAt, LastUpdatedAt: t.LastUpdatedAt, TTLMs: t.TTLMs, PollIntervalMs: t.PollIntervalMs,
		ResultBytes: len(t.Result), Version: t.Version}
	if exp, ok := t.ExpiresAt(); ok {
		v.ExpiresAt = exp.Format(time.RFC3339)
	}
	if len(t.Result) > 0 {
		sum := sha256.Sum256(t.Result)
		v.ResultSHA256 = hex.EncodeToString(sum[:])
	}
	if len(t.Error) > 0 {
		code := gjson.GetBytes(t.Error, "code").Int()
		v.ErrorCode, v.ErrorMessage = &code, redact.Text(gjson.GetBytes(t.Error, "message").Str)
	}
	return v
}

func tasksShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tasks show", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := command{name: "tasks show", synopsis: "tasks show ID [--json]",
		about: "Shows one task record, read-only; payloads appear as size and SHA-256 only. " + storeNote,
		keys:  []string{"store"}, maxArgs: 1}
	open := storeFlags(fs, storeReadOnly, stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseArgs(fs, c, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("tasks show: want exactly one task ID")
	}
	st, _, err := open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	t, err := st.GetTask(ctx, pos[0])
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("tasks show: no task %q in this store", termSafe(pos[0]))
	}
	if err != nil {
		return err
	}
	ins, err := st.ListInputs(ctx, t.ID)
	if err != nil {
		return err
	}
	v := taskView(t)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			view
			Inputs []inputView `json:"inputs"`
		}{v, inputViews(ins)})
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	row := func(k string, val any) { fmt.Fprintf(tw, "%s\t%s\n", k, termSafe(fmt.Sprint(val))) }
	row("id", v.ID)
	row("status", v.Status)
	row("outcome", v.Outcome)
	if v.OutcomeDetail != "" {
		row("outcome detail", v.OutcomeDetail)
	}
	if v.StatusMessage != "" {
		row("status message", v.StatusMessage)
	}
	row("mode", v.Mode)
	row("tool", v.Tool)
	row("arguments sha256", v.ArgsHash)
	row("owner", v.Owner)
	row("session", v.SessionID)
	if v.IdempotencyKey != "" {
		row("idempotency key", v.IdempotencyKey)
	}
	row("upstream", v.Origin)
	row("upstream task", orDash(v.UpstreamTaskID))
	row("created", v.CreatedAt.Format(time.RFC3339Nano))
	row("updated", v.LastUpdatedAt.Format(time.RFC3339Nano))
	if v.TTLMs != nil {
		row("ttl", (time.Duration(*v.TTLMs)*time.Millisecond).String()+" (expires "+v.ExpiresAt+")")
	} else {
		row("ttl", "unlimited")
	}
	row("poll interval", fmt.Sprintf("%d ms", v.PollIntervalMs))
	if v.ResultBytes > 0 {
		row("result", fmt.Sprintf("%d bytes, sha256 %s", v.ResultBytes, v.ResultSHA256))
	}
	if v.ErrorCode != nil {
		row("error", fmt.Sprintf("%d %s", *v.ErrorCode, v.ErrorMessage))
	}
	for _, in := range inputViews(ins) {
		row("input "+in.Key, fmt.Sprintf("%s delivered=%s answered=%s forwarded=%s", in.Method, orDash(in.Delivered), orDash(in.Answered), orDash(in.Forwarded)))
	}
	row("version", v.Version)
	return tw.Flush()
}

type inputView struct {
	Key       string `json:"key"`
	Method    string `json:"method"`
	Delivered string `json:"deliveredAt,omitempty"`
	Answered  string `json:"answeredAt,omitempty"`
	Forwarded string `json:"forwardedAt,omitempty"`
}

func inputViews(ins []record.Input) []inputView {
	ts := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.Format(time.RFC3339)
	}
	out := []inputView{}
	for _, in := range ins {
		out = append(out, inputView{Key: in.Key, Method: in.Method, Delivered: ts(in.DeliveredAt), Answered: ts(in.AnsweredAt), Forwarded: ts(in.ForwardedAt)})
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// tasksReconcile settles a task whose outcome is unknown with the operator's verdict:
// succeeded (the call ran: a retry with its idempotency key gets this task back), failed
// or cancelled (it did not run to completion: the key is released, so a retry runs anew).
// The protocol status never changes.
func tasksReconcile(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tasks reconcile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := command{name: "tasks reconcile", synopsis: "tasks reconcile ID --outcome succeeded|failed|cancelled [--note TEXT]",
		about: "Settles a task whose outcome is unknown with the operator's verdict. It writes to an existing store and\n" +
			"never creates one. " + storeNote, keys: []string{"store"}, maxArgs: 1}
	open := storeFlags(fs, storeWriteExisting, stderr)
	outcome := fs.String("outcome", "", "what really happened: succeeded, failed or cancelled (required)")
	note := fs.String("note", "", "free text kept in the record's audit trail (who checked what)")
	pos, err := parseArgs(fs, c, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("tasks reconcile: want exactly one task ID")
	}
	var ran bool
	switch record.Outcome(*outcome) {
	case record.OutcomeSucceeded:
		ran = true
	case record.OutcomeFailed, record.OutcomeCancelled:
	default:
		return fmt.Errorf("tasks reconcile: --outcome %q: want succeeded, failed or cancelled", *outcome)
	}
	st, _, err := open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	now := time.Now()
	rec, err := forward.Reconcile(ctx, st, pos[0], ran, strings.TrimSpace(*note), now)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("tasks reconcile: no task %q in this store", termSafe(pos[0]))
	}
	if err != nil {
		return fmt.Errorf("tasks reconcile: %w", err)
	}
	if record.Outcome(*outcome) == record.OutcomeCancelled {
		// forward.Reconcile records "did not run" as failed; keep the operator's word.
		rec.Outcome = record.OutcomeCancelled
		if err := st.UpdateTask(ctx, rec); err != nil {
			return fmt.Errorf("tasks reconcile: record cancelled: %w", err)
		}
	}
	fmt.Fprintf(stdout, "task %s: outcome %s (status stays %s)", rec.ID, rec.Outcome, rec.Status)
	if !ran {
		fmt.Fprint(stdout, "; its idempotency key is released, a retry will run anew")
	}
	fmt.Fprintln(stdout)
	return nil
}
