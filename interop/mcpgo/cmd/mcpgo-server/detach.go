package main

import (
	"context"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// mcp-go v1.2.1 runs a task tool's handler with a context derived from the request that
// created the task, and HandleMessage cancels that context as soon as the CreateTaskResult
// is written. A handler that honoured its context would therefore be cancelled at once, on
// every transport. It also gives the handler no handle on its own task, so a handler that
// simply ignored its context could not be stopped by tasks/cancel.
//
// detacher closes that gap with public hooks only:
//   - slotPropagator (a tracing.MetaPropagator, which mcp-go calls once per message on every
//     transport) puts an empty *taskSlot into each message's context;
//   - the OnTaskCreated hook, which runs inside the tools/call that creates the task, fills
//     that slot with the task id and a work context detached from the request;
//   - the handler (a child of the same context) reads the slot and runs on the work context;
//   - the OnTaskCancelled hook cancels the work context of that task id.

// slotKey is the context key of the per-message *taskSlot.
type slotKey struct{}

// taskSlot is filled by the OnTaskCreated hook of the message that created a task.
type taskSlot struct {
	mu     sync.Mutex
	taskID string
	work   context.Context
}

// slotPropagator is a no-op for tracing; ExtractMeta gives every message its own slot.
type slotPropagator struct{}

func (slotPropagator) InjectMeta(_ context.Context, meta *mcp.Meta) *mcp.Meta { return meta }

func (slotPropagator) ExtractMeta(ctx context.Context, _ *mcp.Meta) context.Context {
	return context.WithValue(ctx, slotKey{}, &taskSlot{})
}

// detacher owns the work contexts of running tasks.
type detacher struct {
	mu      sync.Mutex
	cancels map[string]context.CancelFunc
}

func newDetacher() *detacher { return &detacher{cancels: map[string]context.CancelFunc{}} }

// hooks returns the task hooks that create and cancel work contexts. mcp-go calls
// OnTaskCancelled with its task lock held, so the hooks only touch the detacher.
func (d *detacher) hooks() *server.TaskHooks {
	h := &server.TaskHooks{}
	h.AddOnTaskCreated(func(ctx context.Context, m server.TaskMetrics) {
		slot, ok := ctx.Value(slotKey{}).(*taskSlot)
		if !ok {
			return
		}
		work, cancel := context.WithCancel(context.WithoutCancel(ctx))
		d.mu.Lock()
		d.cancels[m.TaskID] = cancel
		d.mu.Unlock()
		slot.mu.Lock()
		slot.taskID, slot.work = m.TaskID, work
		slot.mu.Unlock()
	})
	h.AddOnTaskCancelled(func(_ context.Context, m server.TaskMetrics) { d.release(m.TaskID) })
	h.AddOnTaskCompleted(func(_ context.Context, m server.TaskMetrics) { d.release(m.TaskID) })
	h.AddOnTaskFailed(func(_ context.Context, m server.TaskMetrics) { d.release(m.TaskID) })
	return h
}

// release cancels the task's work context (a no-op once the handler has returned).
func (d *detacher) release(taskID string) {
	d.mu.Lock()
	cancel := d.cancels[taskID]
	delete(d.cancels, taskID)
	d.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// closeAll cancels every running task's work, at shutdown.
func (d *detacher) closeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, cancel := range d.cancels {
		cancel()
		delete(d.cancels, id)
	}
}

// workContext returns the context a handler should run on: the detached work context when
// the call created a task, else ctx itself (a synchronous call lives as long as its request).
func workContext(ctx context.Context) (work context.Context, taskID string) {
	slot, ok := ctx.Value(slotKey{}).(*taskSlot)
	if !ok {
		return ctx, ""
	}
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if slot.work == nil {
		return ctx, ""
	}
	return slot.work, slot.taskID
}
