// Command tbbench measures taskbridge against a direct connection on loopback, in one run:
//
//  1. pass-through: a synchronous tools/call to a trivial tool, direct to the upstream vs
//     through the bridge and through the reference proxies (nginx and Caddy when they are
//     installed, and Go's httputil.ReverseProxy), at 1, 8 and 32 clients, with the ratios
//     of the bridge to each proxy; -profile adds CPU profiles of the bridge;
//  2. task creation per second with the SQLite store (and PostgreSQL with -pg DSN);
//  3. polling: many concurrent legacy pollers on a few running tasks — the upstream's
//     tasks/get rate, which must stay at tasks × 1000 / pollIntervalMs;
//  4. scale: tasks/list page latency over 100,000 records, and the bridge's resident
//     memory with 10,000 tracked non-terminal tasks.
//
// The upstream is the Go fixture, in this process; the bridge is a child process
// (taskbridge serve, built from this checkout), so its memory can be read on its own.
//
//	go run ./cmd/tbbench            # the full run (< 5 minutes on 2 cores)
//	go run ./cmd/tbbench -quick     # a smoke run (seconds), used by the test suite
//	go run ./cmd/tbbench -phases passthrough -profile /tmp/tb   # + the bridge's CPU profiles
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"
)

type options struct {
	quick      bool
	phases     string
	rounds     int
	duration   time.Duration
	pg         string
	bin        string
	fixtureBin string
	nginx      string
	caddy      string
	selfBin    string // this command's binary, for the httputil.ReverseProxy row
	profile    string
	records    int
	tracked    int
	pollers    int
	pollTasks  int
}

func main() {
	var o options
	flag.BoolVar(&o.quick, "quick", false, "smoke mode: tiny sizes and durations")
	flag.StringVar(&o.phases, "phases", "passthrough,creation,polling,scale", "comma-separated phases to run")
	flag.IntVar(&o.rounds, "rounds", 3, "measured rounds per pass-through cell (median reported)")
	flag.DurationVar(&o.duration, "duration", 2*time.Second, "length of one measured round")
	flag.StringVar(&o.pg, "pg", os.Getenv("TASKBRIDGE_TEST_PG"), "PostgreSQL DSN for the store figures (empty: SQLite only)")
	flag.StringVar(&o.bin, "bin", "", "taskbridge binary (default: go build ./cmd/taskbridge)")
	flag.StringVar(&o.fixtureBin, "fixture-bin", "", "tbfixture binary (default: go build ./cmd/tbfixture)")
	flag.StringVar(&o.nginx, "nginx", "/usr/sbin/nginx", "nginx binary for the reference proxy (skipped when missing)")
	flag.StringVar(&o.caddy, "caddy", "/usr/bin/caddy", "Caddy binary for the reference proxy (skipped when missing)")
	flag.StringVar(&o.profile, "profile", "", "file prefix: CPU profiles of the bridge at 1 and 32 clients after the pass-through table")
	reverseProxy := flag.String("reverse-proxy", "", "internal: serve a tuned httputil.ReverseProxy to this upstream URL (the rproxy row)")
	flag.IntVar(&o.records, "records", 100000, "task records for the tasks/list figure")
	flag.IntVar(&o.tracked, "tracked", 10000, "non-terminal tasks tracked for the memory figure")
	flag.IntVar(&o.pollers, "pollers", 1000, "concurrent legacy pollers")
	flag.IntVar(&o.pollTasks, "poll-tasks", 10, "running tasks the pollers share")
	flag.Parse()
	if *reverseProxy != "" {
		if err := serveReverseProxy(*reverseProxy); err != nil {
			fmt.Fprintln(os.Stderr, "tbbench -reverse-proxy:", err)
			os.Exit(1)
		}
		return
	}
	if exe, err := os.Executable(); err == nil {
		o.selfBin = exe
	}
	if o.quick {
		o.rounds, o.duration, o.records, o.tracked, o.pollers = 1, 300*time.Millisecond, 2000, 200, 50
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "tbbench:", err)
		os.Exit(1)
	}
}
