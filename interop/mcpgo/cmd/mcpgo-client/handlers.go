package main

import (
	"context"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// The answers the client gives to the server's requests; the tests look for them in
// ask_client's result.
const (
	samplingAnswer = "pong from mcpgo-client"
	samplingModel  = "mcpgo-client-model"
	rootURI        = "file:///tmp/mcpgo-client-root"
)

// handled is one server→client request the client answered, in order.
type handled struct {
	Method string `json:"method"`
	Params any    `json:"params,omitempty"`
}

// handlers answers sampling/createMessage, roots/list and elicitation/create (accept,
// {confirm:true}) and records each request.
type handlers struct {
	mu   sync.Mutex
	seen []handled
}

func (h *handlers) record(method string, params any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = append(h.seen, handled{Method: method, Params: params})
}

func (h *handlers) log() []handled {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]handled{}, h.seen...)
}

func (h *handlers) CreateMessage(_ context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	h.record(string(mcp.MethodSamplingCreateMessage), req.CreateMessageParams)
	return &mcp.CreateMessageResult{
		SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent(samplingAnswer)},
		Model:           samplingModel,
		StopReason:      "endTurn",
	}, nil
}

func (h *handlers) ListRoots(_ context.Context, _ mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	h.record(string(mcp.MethodListRoots), nil)
	return &mcp.ListRootsResult{Roots: []mcp.Root{{URI: rootURI, Name: "root"}}}, nil
}

func (h *handlers) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	h.record(string(mcp.MethodElicitationCreate), req.Params)
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action:  mcp.ElicitationResponseActionAccept,
		Content: map[string]any{"confirm": true},
	}}, nil
}

// notification is one notifications/tasks/status (or other notification) received.
type notification struct {
	Method string `json:"method"`
	TaskID string `json:"taskId,omitempty"`
	Status string `json:"status,omitempty"`
}

type notifications struct {
	mu   sync.Mutex
	seen []notification
}

func (n *notifications) add(m mcp.JSONRPCNotification) {
	nt := notification{Method: m.Method}
	if id, ok := m.Params.AdditionalFields["taskId"].(string); ok {
		nt.TaskID = id
	}
	if st, ok := m.Params.AdditionalFields["status"].(string); ok {
		nt.Status = st
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.seen = append(n.seen, nt)
}

func (n *notifications) list() []notification {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]notification{}, n.seen...)
}
