package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/taskbridge/taskbridge/internal/config"
)

// cmdConfig: "taskbridge config check FILE" validates FILE (with the TASKBRIDGE_*
// environment applied, as serve would see it) and prints the effective configuration with
// secrets masked and each value's source. Exit status 1 on any problem.
func cmdConfig(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintln(stderr, "usage: taskbridge config check FILE")
		return errors.New("config: want the subcommand check")
	}
	fs := flag.NewFlagSet("config check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: taskbridge config check FILE\n\nValidates FILE and prints the effective configuration (TASKBRIDGE_* variables applied, secrets masked).")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("config check: want exactly one FILE")
	}
	path := fs.Arg(0)
	cfg, err := config.LoadFile(path, os.Getenv)
	if err == nil {
		err = cfg.Validate(true)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: invalid configuration:\n%v\n", path, err)
		return fmt.Errorf("config check: %s is not valid", path)
	}
	fmt.Fprintf(stdout, "# %s: ok — effective configuration (secrets masked; each value commented with its source)\n", path)
	return cfg.Print(stdout)
}
