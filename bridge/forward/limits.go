package forward

import (
	"fmt"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/record"
)

// Per-principal limits (design §7): the request rate is the front door's (door_limit.go),
// concurrent unfinished tasks and upstream backpressure the work gate's (admit.go); the
// result size is kept here. Each refusal is a JSON-RPC error saying which limit and what
// to do; none of them queues work.

// capResult enforces MaxResultBytes on a record about to be written: a result or error
// larger than the cap is dropped and the task fails with a clear error. The real outcome
// (the operation may well have succeeded) is kept.
func (b *Bridge) capResult(rec *record.Task) {
	limit := b.cfg.MaxResultBytes
	n := int64(max(len(rec.Result), len(rec.Error)))
	if limit <= 0 || n <= limit {
		return
	}
	msg := fmt.Sprintf("The result (%d bytes) exceeds the bridge's limit of %d bytes; it was not kept.", n, limit)
	rec.Result = nil
	rec.Status = record.StatusFailed
	rec.StatusMessage = msg
	rec.Error = mustJSON(jsonrpc.NewError(jsonrpc.CodeInternalError, msg).
		WithData(map[string]any{"retryable": false, "outcome": string(rec.Outcome), "limit": "maxResultBytes"}))
}
