package errmap

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/upstream"
	"github.com/taskbridge/taskbridge/sep2663"
)

// TestOneMapper: JSON-RPC errors pass through (the retired -32002 renumbered only from a
// legacy upstream); transport failures become CodeUpstream whose message is exactly the
// class, with the cause kept for the log; nil stays nil.
func TestOneMapper(t *testing.T) {
	refused := &upstream.Error{URL: "http://secret@x/mcp", Method: "tools/call", Err: fmt.Errorf("dial: %w", syscall.ECONNREFUSED)}
	for _, c := range []struct {
		name     string
		got      error
		code     int64
		message  string
		hasCause bool
	}{
		{"refused", FromModern(refused), jsonrpc.CodeUpstream, MsgUnavailable, true},
		{"deadline", FromLegacy(context.DeadlineExceeded), jsonrpc.CodeUpstream, MsgTimeout, true},
		{"invalid reply", FromModern(&upstream.Error{Err: sep2663.ErrInvalidReply}), jsonrpc.CodeUpstream, MsgInvalid, true},
		{"rpc error", FromModern(jsonrpc.NewError(-32602, "bad")), -32602, "bad", false},
		{"retired code, modern upstream", FromModern(jsonrpc.NewError(-32002, "Resource not found")), -32002, "Resource not found", false},
		{"retired code, legacy upstream", FromLegacy(jsonrpc.NewError(-32002, "Resource not found")), jsonrpc.CodeInvalidParams, "Resource not found", false},
		// Issue 16 item 7: a legacy upstream's -32042 never reaches the 2026-07-28 face.
		{"URL elicitation required, legacy upstream", FromLegacy(jsonrpc.NewError(-32042, "Sign in first")), jsonrpc.CodeInternalError, msgURLElicitation + ": Sign in first", false},
		// Issue 16 item 17: a legacy upstream's unreadable reply is "invalid", not "unavailable".
		{"invalid reply, legacy upstream", FromLegacy(&upstream.Error{Legacy: true, Err: fmt.Errorf("%w: not a JSON-RPC response", upstream.ErrInvalidReply)}), jsonrpc.CodeUpstream, MsgInvalid, true},
	} {
		je := jsonrpc.AsError(c.got)
		if je.Code != c.code || je.Message != c.message || (Cause(c.got) != nil) != c.hasCause {
			t.Errorf("%s: %d %q cause %v", c.name, je.Code, je.Message, Cause(c.got))
		}
	}
	if !errors.Is(FromModern(refused), syscall.ECONNREFUSED) {
		t.Error("the cause is not visible to errors.Is")
	}
	if FromModern(nil) != nil || FromLegacy(nil) != nil {
		t.Error("nil mapped to an error")
	}
	if !IsNotFound(jsonrpc.NewError(jsonrpc.CodeInvalidParams, "x")) || IsNotFound(refused) {
		t.Error("IsNotFound")
	}
}

// TestFromModernForLegacyRenumbersHeaderMismatch: an upstream -32020 never reaches a
// 2025-11-25 client as is (that revision has no such code); it becomes -32603 saying what
// it was, the upstream's message and data kept. A 2026-07-28 client gets it unchanged.
func TestFromModernForLegacyRenumbersHeaderMismatch(t *testing.T) {
	up := jsonrpc.NewError(jsonrpc.CodeHeaderMismatch, "Header mismatch: missing Mcp-Param-Region header").
		WithData(map[string]any{"header": "Mcp-Param-Region"})
	got := jsonrpc.AsError(FromModernForLegacy(up))
	if got.Code != jsonrpc.CodeInternalError {
		t.Errorf("code = %d, want -32603", got.Code)
	}
	if want := MsgHeaderMismatch + ": Header mismatch: missing Mcp-Param-Region header"; got.Message != want {
		t.Errorf("message = %q, want %q", got.Message, want)
	}
	if string(got.Data) != `{"header":"Mcp-Param-Region"}` {
		t.Errorf("data = %s", got.Data)
	}
	if c := jsonrpc.AsError(FromModern(up)).Code; c != jsonrpc.CodeHeaderMismatch {
		t.Errorf("FromModern: code = %d, want -32020 unchanged", c)
	}
	other := jsonrpc.NewError(jsonrpc.CodeInvalidParams, "bad")
	if c := jsonrpc.AsError(FromModernForLegacy(other)).Code; c != jsonrpc.CodeInvalidParams {
		t.Errorf("other codes: %d, want them unchanged", c)
	}
}
