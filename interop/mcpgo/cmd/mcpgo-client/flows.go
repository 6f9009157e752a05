package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// flowFunc runs one flow and writes its observations into out.
type flowFunc func(ctx context.Context, s *session, o *options, out map[string]any)

var flows = map[string]flowFunc{
	"tools":              flowTools,
	"sync":               flowSync,
	"create_poll_result": flowCreatePollResult,
	"list":               flowList,
	"cancel":             flowCancel,
	"tool_error":         flowToolError,
	"protocol_error":     flowProtocolError,
	"unknown_id":         flowUnknownID,
	"ask_client":         flowAskClient,
	"ask_client_sync":    flowAskClientSync,
	"elicit":             flowElicit,
	"typed_task_call":    flowTypedTaskCall,
}

// rpcErr is a JSON-RPC error as the flows report it. Code is 0 when mcp-go's client turned
// the error into one it has no code for (a transport failure, or a code mcp-go does not
// know: its typed methods keep only the message then).
type rpcErr struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// typedErr reads the code back from the sentinel errors mcp-go's typed methods return.
func typedErr(err error) *rpcErr {
	if err == nil {
		return nil
	}
	for _, c := range []struct {
		sentinel error
		code     int
	}{{mcp.ErrParseError, mcp.PARSE_ERROR}, {mcp.ErrInvalidRequest, mcp.INVALID_REQUEST},
		{mcp.ErrMethodNotFound, mcp.METHOD_NOT_FOUND}, {mcp.ErrInvalidParams, mcp.INVALID_PARAMS},
		{mcp.ErrInternalError, mcp.INTERNAL_ERROR}, {mcp.ErrRequestInterrupted, mcp.REQUEST_INTERRUPTED},
		{mcp.ErrResourceNotFound, mcp.RESOURCE_NOT_FOUND}} {
		if errors.Is(err, c.sentinel) {
			// AsError wraps the sentinel as "<sentinel>: <wire message>"; report the wire message.
			return &rpcErr{Code: c.code, Message: strings.TrimPrefix(err.Error(), c.sentinel.Error()+": ")}
		}
	}
	return &rpcErr{Message: err.Error()}
}

// args returns -args when given, else def.
func (o *options) argsOr(def map[string]any) any {
	if o.args == "" {
		return def
	}
	var v any
	if err := json.Unmarshal([]byte(o.args), &v); err != nil {
		return map[string]any{"_badArgs": err.Error()}
	}
	return v
}

func (o *options) toolOr(def string) string {
	if o.tool != "" {
		return o.tool
	}
	return def
}

// createTask sends a task-augmented tools/call through the transport layer (the typed
// CallTool cannot decode a CreateTaskResult) and returns the raw result and its task.
func (s *session) createTask(ctx context.Context, tool string, args any, ttl int64) (json.RawMessage, mcp.Task, *rpcErr) {
	s.nextID++
	resp, err := s.c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION,
		ID:      mcp.NewRequestId(s.nextID),
		Method:  string(mcp.MethodToolsCall),
		Params:  map[string]any{"name": tool, "arguments": args, "task": map[string]any{"ttl": ttl}},
	})
	if err != nil {
		return nil, mcp.Task{}, &rpcErr{Message: err.Error()}
	}
	if resp.Error != nil {
		return nil, mcp.Task{}, &rpcErr{Code: resp.Error.Code, Message: resp.Error.Message, Data: resp.Error.Data}
	}
	var created struct {
		Task mcp.Task `json:"task"`
	}
	if err := json.Unmarshal(resp.Result, &created); err != nil || created.Task.TaskId == "" {
		return resp.Result, mcp.Task{}, &rpcErr{Message: "not a CreateTaskResult: " + string(resp.Result)}
	}
	return resp.Result, created.Task, nil
}

// poll calls tasks/get until the task is terminal; it reports every poll's status.
func (s *session) poll(ctx context.Context, id string, out map[string]any) (mcp.Task, *rpcErr) {
	var statuses []string
	polls := 0
	defer func() { out["statuses"], out["polls"] = statuses, polls }()
	for {
		polls++
		t, err := s.c.GetTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: id}})
		if err != nil {
			return mcp.Task{}, typedErr(err)
		}
		if st := string(t.Status); len(statuses) == 0 || statuses[len(statuses)-1] != st {
			statuses = append(statuses, st)
		}
		if t.Status.IsTerminal() {
			return t.Task, nil
		}
		wait := 100 * time.Millisecond
		if t.PollInterval != nil {
			wait = min(max(time.Duration(*t.PollInterval)*time.Millisecond, 50*time.Millisecond), time.Second)
		}
		select {
		case <-ctx.Done():
			return t.Task, &rpcErr{Message: "gave up polling: " + ctx.Err().Error()}
		case <-time.After(wait):
		}
	}
}

// taskResult calls tasks/result and reports the result, its first text and its related-task
// _meta under the key prefix.
func (s *session) taskResult(ctx context.Context, id, prefix string, out map[string]any) *mcp.TaskResultResult {
	res, err := s.c.TaskResult(ctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: id}})
	if err != nil {
		out[prefix+"Error"] = typedErr(err)
		return nil
	}
	out[prefix] = res
	out[prefix+"Text"] = firstText(res.Content)
	out[prefix+"IsError"] = res.IsError
	related := relatedTaskID(res.Meta)
	out[prefix+"RelatedTaskId"] = related
	out[prefix+"RelatedTaskMatches"] = related != "" && related == id
	return res
}

func relatedTaskID(meta *mcp.Meta) string {
	if meta == nil {
		return ""
	}
	m, _ := meta.AdditionalFields[mcp.RelatedTaskMetaKey].(map[string]any)
	id, _ := m["taskId"].(string)
	return id
}

func firstText(content []mcp.Content) string {
	for _, c := range content {
		if t, ok := mcp.AsTextContent(c); ok {
			return t.Text
		}
	}
	return ""
}

// runTask is create → poll → result, the shape most flows share.
func (s *session) runTask(ctx context.Context, tool string, args any, o *options, out map[string]any) {
	out["tool"], out["args"] = tool, args
	created, task, cerr := s.createTask(ctx, tool, args, o.ttl)
	out["created"] = created
	if cerr != nil {
		out["createError"] = cerr
		return
	}
	out["taskId"], out["createdStatus"] = task.TaskId, task.Status
	final, perr := s.poll(ctx, task.TaskId, out)
	out["finalStatus"], out["statusMessage"], out["finalTask"] = final.Status, final.StatusMessage, final
	if perr != nil {
		out["pollError"] = perr
		return
	}
	s.taskResult(ctx, task.TaskId, "result", out)
}

func flowTools(ctx context.Context, s *session, _ *options, out map[string]any) {
	res, err := s.c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		out["error"] = typedErr(err)
		return
	}
	support := map[string]any{}
	for _, t := range res.Tools {
		if t.Execution != nil && t.Execution.TaskSupport != "" {
			support[t.Name] = t.Execution.TaskSupport
		} else {
			support[t.Name] = nil
		}
	}
	out["taskSupport"] = support
}

func flowSync(ctx context.Context, s *session, o *options, out map[string]any) {
	tool, args := o.toolOr("greet"), o.argsOr(map[string]any{"name": "World"})
	out["tool"], out["args"] = tool, args
	res, err := s.c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
	if err != nil {
		out["error"] = typedErr(err)
		return
	}
	out["result"], out["resultText"], out["isError"] = res, firstText(res.Content), res.IsError
}

func flowCreatePollResult(ctx context.Context, s *session, o *options, out map[string]any) {
	s.runTask(ctx, o.toolOr("slow_compute"), o.argsOr(map[string]any{"seconds": 1, "label": "mcpgo"}), o, out)
}

// flowList creates three tasks and lists them page by page (tasks/list with nextCursor).
func flowList(ctx context.Context, s *session, o *options, out map[string]any) {
	tool, args := o.toolOr("slow_compute"), o.argsOr(map[string]any{"seconds": 1})
	out["tool"], out["args"] = tool, args
	var created []string
	for range 3 {
		_, task, err := s.createTask(ctx, tool, args, o.ttl)
		if err != nil {
			out["createError"] = err
			return
		}
		created = append(created, task.TaskId)
	}
	out["createdIds"] = created
	var listed []string
	var pageSizes []int
	cursor := mcp.Cursor("")
	seen := map[mcp.Cursor]bool{}
	for len(pageSizes) < 50 {
		req := mcp.ListTasksRequest{}
		req.Params.Cursor = cursor
		page, err := s.c.ListTasksByPage(ctx, req)
		if err != nil {
			out["listError"] = typedErr(err)
			break
		}
		pageSizes = append(pageSizes, len(page.Tasks))
		for _, t := range page.Tasks {
			listed = append(listed, t.TaskId)
		}
		if page.NextCursor == "" {
			break
		}
		if seen[page.NextCursor] {
			out["cursorRepeated"] = true
			break
		}
		seen[page.NextCursor], cursor = true, page.NextCursor
	}
	out["listedIds"], out["pageSizes"], out["pages"] = listed, pageSizes, len(pageSizes)
	all := true
	for _, id := range created {
		found := false
		for _, l := range listed {
			found = found || l == id
		}
		all = all && found
	}
	out["includesAll"] = all
}

// flowCancel creates a long task, cancels it, and looks at it again.
func flowCancel(ctx context.Context, s *session, o *options, out map[string]any) {
	tool, args := o.toolOr("slow_compute"), o.argsOr(map[string]any{"seconds": 30})
	out["tool"], out["args"] = tool, args
	_, task, cerr := s.createTask(ctx, tool, args, o.ttl)
	if cerr != nil {
		out["createError"] = cerr
		return
	}
	id := task.TaskId
	out["taskId"] = id
	time.Sleep(300 * time.Millisecond) // let the work start
	start := time.Now()
	res, err := s.c.CancelTask(ctx, mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: id}})
	out["cancelMs"] = time.Since(start).Milliseconds()
	if err != nil {
		out["cancelError"] = typedErr(err)
	} else {
		out["cancelResult"], out["cancelStatus"] = res, res.Status
	}
	if t, err := s.c.GetTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: id}}); err != nil {
		out["afterError"] = typedErr(err)
	} else {
		out["afterStatus"], out["afterTask"] = t.Status, t.Task
	}
	if _, err := s.c.CancelTask(ctx, mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: id}}); err != nil {
		out["secondCancelError"] = typedErr(err)
	}
	s.taskResult(ctx, id, "resultAfterCancel", out)
}

func flowToolError(ctx context.Context, s *session, o *options, out map[string]any) {
	s.runTask(ctx, o.toolOr("failing_job"), o.argsOr(map[string]any{}), o, out)
}

func flowProtocolError(ctx context.Context, s *session, o *options, out map[string]any) {
	s.runTask(ctx, o.toolOr("protocol_error_job"), o.argsOr(map[string]any{}), o, out)
}

func flowUnknownID(ctx context.Context, s *session, _ *options, out map[string]any) {
	const id = "no-such-task"
	_, err := s.c.GetTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: id}})
	out["getTaskError"] = typedErr(err)
	_, err = s.c.TaskResult(ctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: id}})
	out["taskResultError"] = typedErr(err)
	_, err = s.c.CancelTask(ctx, mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: id}})
	out["cancelTaskError"] = typedErr(err)
}

func flowAskClient(ctx context.Context, s *session, o *options, out map[string]any) {
	s.runTask(ctx, o.toolOr("ask_client"), o.argsOr(map[string]any{}), o, out)
}

func flowAskClientSync(ctx context.Context, s *session, o *options, out map[string]any) {
	o.tool = o.toolOr("ask_client")
	if o.args == "" {
		o.args = "{}"
	}
	flowSync(ctx, s, o, out)
}

// flowElicit runs a task that asks one elicitation (the Go fixture's confirm_delete by
// default); the request must reach the client on its own (the flow only polls tasks/get
// until the task is terminal, as mcp-go's users do).
func flowElicit(ctx context.Context, s *session, o *options, out map[string]any) {
	s.runTask(ctx, o.toolOr("confirm_delete"), o.argsOr(map[string]any{"filename": "a.txt"}), o, out)
}

// flowTypedTaskCall shows why the other flows create tasks through the transport: mcp-go's
// typed CallTool with params.task set decodes the CreateTaskResult as a CallToolResult.
func flowTypedTaskCall(ctx context.Context, s *session, o *options, out map[string]any) {
	tool, args := o.toolOr("slow_compute"), o.argsOr(map[string]any{"seconds": 1})
	out["tool"], out["args"] = tool, args
	ttl := o.ttl
	res, err := s.c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args,
		Task: &mcp.TaskParams{TTL: &ttl}}})
	if err != nil {
		out["error"] = typedErr(err)
		return
	}
	out["result"] = res
}
