package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// TestQuickRun runs the benchmark command in smoke mode, so it cannot rot: every phase
// must run and print its figures (the figures themselves are not judged here: timing
// belongs in docs/benchmarks.md, measured on a quiet machine).
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	o := options{quick: true, phases: "passthrough,creation,polling,scale", nginx: "/usr/sbin/nginx", caddy: "/usr/bin/caddy",
		pg: os.Getenv("TASKBRIDGE_TEST_PG"), pollTasks: 10}
	o.rounds, o.duration, o.records, o.tracked, o.pollers = 1, 200*time.Millisecond, 500, 50, 20
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r, w, _ := os.Pipe()
	stdout := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() { b, _ := io.ReadAll(r); done <- string(b) }()
	err := run(ctx, o)
	w.Close()
	os.Stdout = stdout
	out := <-done
	t.Log(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1. pass-through", "bridge", "throughput ×", "rproxy", "bridge against each reference proxy", "2. task creation", "tasks/s",
		"3. polling", "upstream tasks/get", "ratio", "4. scale", "tasks/list page", "bridge RSS"} {
		if !strings.Contains(out, want) {
			t.Errorf("benchmark output lacks %q", want)
		}
	}
}
