package sep2663

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// subscriptions/listen with the Tasks filter (2026-07-28 §subscriptions/listen, SEP-2663
// §Notifications): one long-lived request whose reply stream carries
// notifications/subscriptions/acknowledged first, then notifications/tasks (params: a
// DetailedTask) for the covered tasks. Over HTTP the reply is an SSE stream; over stdio the
// notifications carry _meta.subscriptionId and a StdioTransport routes them to the call.

// NotificationAck is the first message of a listen stream (MethodSubscriptionsListen).
const NotificationAck = "notifications/subscriptions/acknowledged"

// ListenHandlers receive what a task listen delivers, in order, on the calling goroutine.
type ListenHandlers struct {
	// Ack receives the task ids the server agreed to cover (may be fewer than asked).
	Ack func(taskIDs []string)
	// Task receives each notifications/tasks.
	Task func(*DetailedTask)
}

// ListenTasks opens subscriptions/listen with notifications.taskIds and blocks until the
// stream ends. It returns nil when the server closed it cleanly (the listen response),
// ctx.Err() when ctx ended, a *jsonrpc.Error when the server refused (e.g. -32601 from an
// upstream without listen, -32021), and an *upstream.Error otherwise, including a stream
// that dropped without the response. The tasks extension is declared (required with
// taskIds).
func (c *Client) ListenTasks(ctx context.Context, taskIDs []string, meta RequestMeta, h ListenHandlers) error {
	meta, err := tasksMeta(meta)
	if err != nil {
		return fmt.Errorf("sep2663: %s: %w", MethodSubscriptionsListen, err)
	}
	if taskIDs == nil {
		taskIDs = []string{}
	}
	params := marshal(map[string]any{"notifications": map[string]any{"taskIds": taskIDs}})
	var bad error
	_, err = c.Call(ctx, MethodSubscriptionsListen, params, meta, func(m *jsonrpc.Message) {
		switch m.Method {
		case NotificationAck:
			if h.Ack != nil {
				var ids []string
				for _, v := range gjson.GetBytes(m.Params, "notifications.taskIds").Array() {
					ids = append(ids, v.String())
				}
				h.Ack(ids)
			}
		case NotificationTasks:
			var dt DetailedTask
			if err := json.Unmarshal(m.Params, &dt); err != nil || dt.TaskID == "" {
				bad = c.invalid(MethodSubscriptionsListen, "notifications/tasks without a task")
				return
			}
			if h.Task != nil {
				h.Task(&dt)
			}
		}
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return err
	}
	return bad
}

// The core change notifications a listen filter asks for (2026-07-28 §subscriptions/listen).
const (
	NotificationToolsListChanged     = "notifications/tools/list_changed"
	NotificationPromptsListChanged   = "notifications/prompts/list_changed"
	NotificationResourcesListChanged = "notifications/resources/list_changed"
	NotificationResourceUpdated      = "notifications/resources/updated"
)

// SubscriptionFilter is the core part of a listen's notifications filter (the Tasks
// extension's taskIds is ListenTasks'). A nil ResourceSubscriptions is left out.
type SubscriptionFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

// Empty reports whether the filter asks for nothing.
func (f SubscriptionFilter) Empty() bool {
	return !f.ToolsListChanged && !f.PromptsListChanged && !f.ResourcesListChanged && len(f.ResourceSubscriptions) == 0
}

// ChangeHandlers receive what a core listen delivers, in order, on the calling goroutine.
type ChangeHandlers struct {
	// Ack receives the filter the server agreed to honour.
	Ack func(SubscriptionFilter)
	// Notify receives every other notification of the stream as sent (its _meta still
	// carries the subscriptionId).
	Notify func(*jsonrpc.Message)
}

// Listen opens subscriptions/listen with the core filter f and blocks until the stream
// ends, with ListenTasks' return values (nil: a clean close; ctx.Err(); a *jsonrpc.Error
// refusal; an *upstream.Error otherwise).
func (c *Client) Listen(ctx context.Context, f SubscriptionFilter, meta RequestMeta, h ChangeHandlers) error {
	params := marshal(map[string]any{"notifications": f})
	_, err := c.Call(ctx, MethodSubscriptionsListen, params, meta, func(m *jsonrpc.Message) {
		switch {
		case m.Method == NotificationAck:
			if h.Ack != nil {
				var ack struct {
					Notifications SubscriptionFilter `json:"notifications"`
				}
				_ = json.Unmarshal(m.Params, &ack)
				h.Ack(ack.Notifications)
			}
		case m.IsNotification() && h.Notify != nil:
			h.Notify(m)
		}
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
