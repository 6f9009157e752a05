package mapping

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/taskbridge/taskbridge/internal/jsonobj"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/sep2663"
)

// Observation is what one upstream tasks/get (or notification) says, translated for legacy
// clients.
type Observation struct {
	Status        record.Status // legacy status
	StatusMessage string        // sanitized (control chars stripped, capped at MaxStatusMessage runes)
	// Result is the CallToolResult for tasks/result (resultType stripped), set for completed
	// and for failed-by-isError.
	Result json.RawMessage
	// Error is the JSON-RPC error object {code,message,data}, set for failed-by-error.
	Error   json.RawMessage
	Outcome record.Outcome
	// Inputs are the outstanding input requests, when input_required.
	Inputs         map[string]sep2663.InputRequest
	TTLMs          *int64 // as the upstream said (nil: unlimited); cap it with CapTTL
	PollIntervalMs int64  // 0 when absent
}

// Messages the bridge writes itself.
const (
	msgFailedNoError   = "upstream task failed without an error object"
	msgCompletedNoBody = "upstream task completed without a valid result"
	msgToolError       = "tool returned an error"
	msgLost            = "the upstream server no longer knows this task; its outcome is unknown"
)

// Observe applies the design's status table (design §3 "Status and field mapping"):
//
//	working                                 → working
//	input_required + inputRequests          → input_required (Inputs set)
//	input_required without inputRequests    → working (nothing to relay; decision, see doc.go)
//	completed, isError false/absent         → completed, Result, Outcome succeeded
//	completed, isError:true                 → failed, Result kept, statusMessage = tool error text, Outcome failed
//	completed, result missing / not object  → failed, Error -32603, Outcome succeeded (decision)
//	failed + error                          → failed, Error kept, Outcome failed
//	failed without error                    → failed, Error {-32603, "upstream task failed without an error object"}
//	cancelled                               → cancelled, Outcome cancelled
//
// Draft status words are normalized first (NormalizeStatus). An unknown status is
// ErrUnknownStatus, wrapped with the value; the caller keeps the last known status.
func Observe(dt *sep2663.DetailedTask) (Observation, error) {
	if dt == nil {
		return Observation{}, fmt.Errorf("%w: no task", ErrUnknownStatus)
	}
	st, ok := NormalizeStatus(string(dt.Status))
	if !ok {
		return Observation{}, fmt.Errorf("%w: %q", ErrUnknownStatus, truncate(string(dt.Status), 64))
	}
	o := Observation{
		StatusMessage: SanitizeStatusMessage(dt.StatusMessage),
		TTLMs:         copyTTL(dt.TTLMs),
	}
	if dt.PollIntervalMs != nil && *dt.PollIntervalMs > 0 {
		o.PollIntervalMs = *dt.PollIntervalMs
	}
	switch st {
	case sep2663.StatusWorking:
		o.Status, o.Outcome = record.StatusWorking, record.OutcomePending
	case sep2663.StatusInputRequired:
		o.Status, o.Outcome = record.StatusWorking, record.OutcomePending
		if len(dt.InputRequests) > 0 {
			o.Status = record.StatusInputRequired
			o.Inputs = make(map[string]sep2663.InputRequest, len(dt.InputRequests))
			for k, v := range dt.InputRequests {
				o.Inputs[k] = v
			}
		}
	case sep2663.StatusCompleted:
		observeCompleted(&o, dt.Result)
	case sep2663.StatusFailed:
		o.Status, o.Outcome = record.StatusFailed, record.OutcomeFailed
		e := dt.Error
		if e == nil {
			e = jsonrpc.NewError(jsonrpc.CodeInternalError, msgFailedNoError)
		}
		o.Error, _ = json.Marshal(e) // a *jsonrpc.Error with valid Data always encodes
		if o.Error == nil {          // Data held invalid JSON: keep code and message
			o.Error, _ = json.Marshal(jsonrpc.NewError(e.Code, e.Message))
		}
		if o.StatusMessage == "" {
			o.StatusMessage = SanitizeStatusMessage(e.Message)
		}
	case sep2663.StatusCancelled:
		o.Status, o.Outcome = record.StatusCancelled, record.OutcomeCancelled
	}
	return o, nil
}

func observeCompleted(o *Observation, result json.RawMessage) {
	ms, err := jsonobj.Parse(result)
	if err != nil {
		// The upstream says the operation completed but gave nothing a legacy client can be
		// handed: the task fails for the client, the operation's outcome stays succeeded, and
		// a retry would run it twice.
		o.Status, o.Outcome = record.StatusFailed, record.OutcomeSucceeded
		o.Error, _ = json.Marshal(jsonrpc.NewError(jsonrpc.CodeInternalError, msgCompletedNoBody).
			WithData(errorData{Retryable: false, Outcome: record.OutcomeSucceeded}))
		if o.StatusMessage == "" {
			o.StatusMessage = msgCompletedNoBody
		}
		return
	}
	o.Result = ms.Without("resultType").Encode()
	if v, ok := ms.Get("isError"); !ok || string(v) != "true" {
		o.Status, o.Outcome = record.StatusCompleted, record.OutcomeSucceeded
		return
	}
	o.Status, o.Outcome = record.StatusFailed, record.OutcomeFailed
	if o.StatusMessage == "" {
		o.StatusMessage = SanitizeStatusMessage(firstText(ms))
	}
	if o.StatusMessage == "" {
		o.StatusMessage = msgToolError
	}
}

// firstText returns the text of the first non-empty text content block of a CallToolResult.
func firstText(ms jsonobj.Object) string {
	raw, ok := ms.Get("content")
	if !ok {
		return ""
	}
	var blocks []json.RawMessage
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	for _, b := range blocks {
		var c struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(b, &c) == nil && c.Type == "text" && c.Text != "" {
			return c.Text
		}
	}
	return ""
}

// errorData is the data taskbridge adds to the error of a failed task (design §9).
type errorData struct {
	Retryable bool           `json:"retryable"`
	Outcome   record.Outcome `json:"outcome"`
}

// LostTask is the observation for a task the upstream no longer knows (-32602 on a
// non-terminal task): status failed, statusMessage says the outcome is unknown, Outcome
// unknown, and an Error (-32010, taskbridge's upstream code) with data
// {retryable:false, outcome:"unknown"}: an unknown outcome is never retried automatically.
func LostTask() Observation {
	e, _ := json.Marshal(jsonrpc.NewError(jsonrpc.CodeUpstream, msgLost).
		WithData(errorData{Retryable: false, Outcome: record.OutcomeUnknown}))
	return Observation{
		Status:        record.StatusFailed,
		StatusMessage: msgLost,
		Error:         e,
		Outcome:       record.OutcomeUnknown,
	}
}

// Apply writes an observation into a record, keeping the legacy client's view legal, and
// reports whether anything changed:
//   - a terminal record keeps its status, message, result and error for ever; only a pending
//     (or empty) Outcome is filled in, so a task cancelled at the client's request still
//     records what really happened upstream;
//   - otherwise the status, message, payloads, outcome and the upstream poll interval are
//     taken over, and LastUpdatedAt moves to now when the status or message changed.
//
// TTL and the interval told to clients are the caller's (CapTTL, ClampPollInterval).
func Apply(t *record.Task, o Observation, now time.Time) bool {
	if t.Status.Terminal() {
		if (t.Outcome == "" || t.Outcome == record.OutcomePending) && o.Outcome != "" && o.Outcome != record.OutcomePending {
			t.Outcome = o.Outcome
			return true
		}
		return false
	}
	if !CanTransition(t.Status, o.Status) {
		return false
	}
	changed := false
	if t.Status != o.Status || t.StatusMessage != o.StatusMessage {
		t.Status, t.StatusMessage = o.Status, o.StatusMessage
		t.LastUpdatedAt = now.UTC().Truncate(time.Millisecond)
		changed = true
	}
	if !bytesEqual(t.Result, o.Result) || !bytesEqual(t.Error, o.Error) || t.Outcome != o.Outcome {
		t.Result, t.Error, t.Outcome = o.Result, o.Error, o.Outcome
		changed = true
	}
	if o.PollIntervalMs > 0 && t.UpstreamPollMs != o.PollIntervalMs {
		t.UpstreamPollMs = o.PollIntervalMs
		changed = true
	}
	return changed
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

func copyTTL(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
