package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Texts the tests assert on. They match internal/fixture (the Go SEP-2663 fixture) where
// the tools overlap, so one assertion fits both upstreams.
const (
	protocolErrorMessage = "Internal error: simulated protocol failure"
	toolErrorText        = "failing_job: simulated tool failure"
	samplingPrompt       = "ask_client: say something"
	elicitationMessage   = "ask_client: proceed?"
)

// tools holds what the handlers share: the server (for requests to the client), the
// counters and the sleep scale.
type tools struct {
	srv   *server.MCPServer
	count *counter
	scale float64
}

// register adds every tool to srv. Task support is mcp-go's own: a regular handler with
// execution.taskSupport optional or required, which mcp-go runs as a task when the call
// carries params.task.
func (t *tools) register() {
	t.srv.AddTool(mcp.NewTool("greet",
		mcp.WithDescription("Returns Hello, {name}! (sync; name defaults to World)."),
		mcp.WithString("name")), t.wrap("greet", t.greet))
	t.srv.AddTool(mcp.NewTool("slow_compute",
		mcp.WithDescription("Sleeps `seconds` (default 1) then returns 42; cancellable."),
		mcp.WithNumber("seconds"), mcp.WithString("label"),
		mcp.WithTaskSupport(mcp.TaskSupportOptional)), t.wrap("slow_compute", t.slowCompute))
	t.srv.AddTool(mcp.NewTool("failing_job",
		mcp.WithDescription("Task required; after `seconds` (default 1) ends with an isError tool result."),
		mcp.WithNumber("seconds"),
		mcp.WithTaskSupport(mcp.TaskSupportRequired)), t.wrap("failing_job", t.failingJob))
	t.srv.AddTool(mcp.NewTool("protocol_error_job",
		mcp.WithDescription("After `seconds` (default 0.5) fails with a Go error, which mcp-go sends as JSON-RPC -32603."),
		mcp.WithNumber("seconds"),
		mcp.WithTaskSupport(mcp.TaskSupportOptional)), t.wrap("protocol_error_job", t.protocolErrorJob))
	t.srv.AddTool(mcp.NewTool("ask_client",
		mcp.WithDescription("Sends sampling/createMessage, roots/list and elicitation/create to the client, waits for the answers and returns them."),
		mcp.WithNumber("timeout"),
		mcp.WithTaskSupport(mcp.TaskSupportOptional)), t.wrap("ask_client", t.askClient))
}

// wrap runs h on the call's work context (see detach.go) and counts the run.
func (t *tools) wrap(name string, h server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		work, _ := workContext(ctx)
		t.count.add(name, func(c *toolCounts) { c.Runs++ })
		res, err := h(work, req)
		if err != nil && work.Err() != nil && errors.Is(err, work.Err()) {
			t.count.add(name, func(c *toolCounts) { c.Cancelled++ })
		} else {
			t.count.add(name, func(c *toolCounts) { c.Finished++ })
		}
		return res, err
	}
}

// sleep waits seconds×scale, or until ctx ends.
func (t *tools) sleep(ctx context.Context, seconds float64) error {
	timer := time.NewTimer(time.Duration(seconds * t.scale * float64(time.Second)))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func secs(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func (t *tools) greet(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return mcp.NewToolResultText("Hello, " + req.GetString("name", "World") + "!"), nil
}

func (t *tools) slowCompute(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	n := req.GetFloat("seconds", 1)
	if err := t.sleep(ctx, n); err != nil {
		return nil, err
	}
	label := req.GetString("label", "default")
	return mcp.NewToolResultText(fmt.Sprintf("Computation %s completed after %ss. Result: 42.", label, secs(n))), nil
}

// failingJob ends with a tool error. mcp-go stores a returned result as "completed" whatever
// its isError says: it has no way to end a task "failed" with a result.
func (t *tools) failingJob(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := t.sleep(ctx, req.GetFloat("seconds", 1)); err != nil {
		return nil, err
	}
	return mcp.NewToolResultError(toolErrorText), nil
}

// protocolErrorJob returns a Go error: mcp-go ends the task "failed" (statusMessage = the
// error text) and answers tasks/result with JSON-RPC -32603 and that text. -32603 is the
// only code mcp-go can give a failed task.
func (t *tools) protocolErrorJob(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := t.sleep(ctx, req.GetFloat("seconds", 0.5)); err != nil {
		return nil, err
	}
	return nil, errors.New(protocolErrorMessage)
}

// askClient asks the client three things in turn and returns the answers. mcp-go sends
// sampling/createMessage and roots/list on the session's standalone GET stream only, and
// elicitation/create on the POST stream of the request being handled when that stream is
// still open (a synchronous call), else on the GET stream too (a task: its creating POST
// has already been answered).
func (t *tools) askClient(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(req.GetFloat("timeout", 30)*float64(time.Second)))
	defer cancel()
	sampled, err := t.srv.RequestSampling(ctx, mcp.CreateMessageRequest{CreateMessageParams: mcp.CreateMessageParams{
		Messages:  []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent(samplingPrompt)}},
		MaxTokens: 32,
	}})
	if err != nil {
		return nil, fmt.Errorf("ask_client: sampling/createMessage: %w", err)
	}
	roots, err := t.srv.RequestRoots(ctx, mcp.ListRootsRequest{})
	if err != nil {
		return nil, fmt.Errorf("ask_client: roots/list: %w", err)
	}
	elicited, err := t.srv.RequestElicitation(ctx, mcp.ElicitationRequest{Params: mcp.ElicitationParams{
		Mode:    "form",
		Message: elicitationMessage,
		RequestedSchema: map[string]any{"type": "object",
			"properties": map[string]any{"confirm": map[string]any{"type": "boolean"}},
			"required":   []string{"confirm"}},
	}})
	if err != nil {
		return nil, fmt.Errorf("ask_client: elicitation/create: %w", err)
	}
	uris := []string{}
	for _, r := range roots.Roots {
		uris = append(uris, r.URI)
	}
	text := contentText(sampled.Content)
	structured := map[string]any{
		"sampling":    map[string]any{"model": sampled.Model, "text": text},
		"roots":       uris,
		"elicitation": map[string]any{"action": elicited.Action, "content": elicited.Content},
	}
	return mcp.NewToolResultStructured(structured,
		fmt.Sprintf("ask_client: sampling=%q roots=%v elicitation=%s", text, uris, elicited.Action)), nil
}

// contentText returns the text of a sampling answer's content (one content block).
func contentText(c any) string {
	switch v := c.(type) {
	case mcp.TextContent:
		return v.Text
	case *mcp.TextContent:
		return v.Text
	default:
		return fmt.Sprint(v)
	}
}
