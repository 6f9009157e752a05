// Command taskbridge is a translating MCP proxy for the migration from the 2025-11-25
// experimental Tasks API to the SEP-2663 Tasks extension of MCP 2026-07-28.
//
//	taskbridge serve --listen 127.0.0.1:8080 --upstream http://127.0.0.1:9000/mcp
//	taskbridge demo
//
// Only this package turns errors into exit codes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

const usage = `taskbridge — MCP Tasks migration bridge (2025-11-25 clients ⇄ SEP-2663 servers)

Usage:
  taskbridge serve [--config FILE] --listen ADDR --upstream URL|--upstream-cmd CMD [--store sqlite:PATH|postgres://…] [--admin ADDR]
  taskbridge stdio --upstream URL|--upstream-cmd CMD   (an MCP client launches this; logs on stderr)
  taskbridge probe URL [--header 'Authorization: …'] [--json|--wide]   (the upstream's manifest and the route per tool)
  taskbridge config check FILE [--connect]   (validate a config file; print the effective config, secrets masked)
  taskbridge tasks list [--principal P] [--status S] | tasks show ID | tasks reconcile ID --outcome …
  taskbridge verify --upstream URL|--upstream-cmd CMD [--config FILE] [--plan PLAN.yaml] [--json]   (the promotion gates)
  taskbridge report [--json]      (migration report: legacy clients still seen, tasks in flight, sunset)
  taskbridge demo
  taskbridge version | --version   (version, module, VCS revision, build date)

Run "taskbridge COMMAND --help" for a command's flags, grouped by topic with their types and defaults.
Read-only commands (report, tasks list|show, probe, config check) never create or migrate a store.
`

func main() {
	if os.Getenv("GOGC") == "" {
		// The bridge's heap is small and short-lived (per-request buffers); collecting less
		// often buys latency and throughput on the pass-through path (docs/benchmarks.md).
		debug.SetGCPercent(400)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "taskbridge:", err)
	}
	os.Exit(exitCode(err))
}

// exitCode is the process status for run's error: 0 for none or a help request, an
// exitError's own code (verify: 2 for a usage error), else 1.
func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ee):
		return ee.code
	}
	return 1
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "serve":
		return cmdServe(ctx, args[1:], stdout, stderr)
	case "stdio":
		return cmdStdio(ctx, args[1:], os.Stdin, stdout, stderr)
	case "probe":
		return cmdProbe(ctx, args[1:], stdout, stderr)
	case "config":
		return cmdConfig(ctx, args[1:], stdout, stderr)
	case "tasks":
		return cmdTasks(ctx, args[1:], stdout, stderr)
	case "verify":
		return cmdVerify(ctx, args[1:], stdout, stderr)
	case "report":
		return cmdReport(ctx, args[1:], stdout, stderr)
	case "demo":
		return cmdDemo(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-version":
		printVersion(stdout)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}
