package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// The demo is a newcomer's first contact: it must finish quickly and show the whole flow.
func TestDemoShowsTheWholeFlow(t *testing.T) {
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	if err := run(ctx, []string{"demo", "--scale", "0.2"}, &out, &errb); err != nil {
		t.Fatalf("demo: %v\n%s\n%s", err, out.String(), errb.String())
	}
	text := out.String()
	for _, want := range []string{
		"tasks capability {\"list\":{},\"cancel\":{},\"requests\":{\"tools\":{\"call\":{}}}}",
		"taskSupport=optional",
		"CreateTaskResult",
		"completed",
		"Result: 42.",
		"related-task",
		"legacy status failed",
		"tasks/cancel on a running task → status cancelled",
		"already in terminal status",
		"tasks/list",
		"polled to the end by the bridge",
		"Task not found",
		"done.",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q:\n%s", want, text)
		}
	}
	t.Logf("demo took %v", time.Since(start))
}
