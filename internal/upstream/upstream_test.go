package upstream

import (
	"context"
	"fmt"
	"syscall"
	"testing"
)

func TestError(t *testing.T) {
	refused := &Error{URL: "http://x/mcp", Method: "tools/call", Err: fmt.Errorf("dial: %w", syscall.ECONNREFUSED)}
	if !refused.NeverSent() || refused.Timeout() {
		t.Errorf("refused: NeverSent %v Timeout %v", refused.NeverSent(), refused.Timeout())
	}
	late := &Error{Legacy: true, URL: "http://x/mcp", Method: "tasks/get", Status: 502, Err: context.DeadlineExceeded}
	if late.NeverSent() || !late.Timeout() {
		t.Errorf("deadline: NeverSent %v Timeout %v", late.NeverSent(), late.Timeout())
	}
	if got, want := late.Error(), "legacy upstream http://x/mcp: tasks/get: HTTP 502: context deadline exceeded"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := (&Error{URL: "u", Method: "m", Status: 200, Err: fmt.Errorf("boom")}).Error(), "upstream u: m: boom"; got != want {
		t.Errorf("Error() = %q, want %q (no status for a 2xx)", got, want)
	}
}
