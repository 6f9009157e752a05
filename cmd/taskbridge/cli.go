package main

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/taskbridge/taskbridge/internal/config"
)

// command describes one subcommand's command line for parseArgs and its help.
type command struct {
	name     string   // "serve", "tasks list"
	synopsis string   // usage lines after "Usage: taskbridge "
	about    string   // a paragraph under the synopsis
	keys     []string // config keys registered as flags (shown grouped by topic)
	maxArgs  int      // positional arguments allowed (-1: any)
}

// parseArgs parses args into fs the way users expect:
//
//   - -h, -help and --help print the help on stdout and return flag.ErrHelp (exit 0);
//   - a boolean flag takes "--flag", "--flag=false" and also "--flag false" (the flag
//     package alone would read the false as a positional argument and turn the flag on);
//   - flags may come before or after positional arguments;
//   - more positional arguments than the command takes is an error naming the first
//     unexpected one.
//
// It returns the positional arguments.
func parseArgs(fs *flag.FlagSet, c command, args []string, stdout io.Writer) ([]string, error) {
	fs.Usage = func() { fmt.Fprintf(fs.Output(), "Run \"taskbridge %s --help\" for its flags.\n", c.name) }
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" {
			printHelp(stdout, fs, c)
			return nil, flag.ErrHelp
		}
	}
	var pos []string
	rest := joinBoolValues(fs, args)
	for {
		if err := fs.Parse(rest); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		if used := len(rest) - fs.NArg(); used > 0 && rest[used-1] == "--" {
			pos = append(pos, fs.Args()...) // everything after "--" is an argument
			break
		}
		rest = fs.Args()
		pos, rest = append(pos, rest[0]), rest[1:]
	}
	if c.maxArgs >= 0 && len(pos) > c.maxArgs {
		fs.Usage()
		return nil, fmt.Errorf("%s: unexpected argument %q", c.name, pos[c.maxArgs])
	}
	return pos, nil
}

// joinBoolValues rewrites "--flag true|false" into "--flag=true|false" for boolean flags.
func joinBoolValues(fs *flag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		name, isFlag := flagName(a)
		if isFlag && !strings.Contains(name, "=") && i+1 < len(args) && isBoolFlag(fs, name) {
			if v := strings.ToLower(args[i+1]); v == "true" || v == "false" {
				out = append(out, a+"="+v)
				i++
				continue
			}
		}
		out = append(out, a)
	}
	return out
}

// flagName strips one or two leading dashes.
func flagName(a string) (string, bool) {
	if len(a) < 2 || a[0] != '-' {
		return "", false
	}
	return strings.TrimPrefix(a[1:], "-"), true
}

func isBoolFlag(fs *flag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// printHelp writes the command's usage, its config flags grouped by topic with value
// types and defaults, then its own flags.
func printHelp(w io.Writer, fs *flag.FlagSet, c command) {
	fmt.Fprintf(w, "Usage: taskbridge %s\n", c.synopsis)
	if c.about != "" {
		fmt.Fprintf(w, "\n%s\n", c.about)
	}
	own := map[string]bool{}
	if len(c.keys) > 0 {
		fmt.Fprintf(w, "\nSettings (each flag is also a config-file key and a TASKBRIDGE_* variable: --poll-floor-ms,\npoll_floor_ms, TASKBRIDGE_POLL_FLOOR_MS; precedence flag > environment > file > default;\nsee docs/configuration.md):\n")
		for _, g := range config.Groups(c.keys...) {
			fmt.Fprintf(w, "\n  %s:\n", g.Title)
			for _, k := range g.Keys {
				name := config.FlagName(k)
				own[name] = true
				helpLine(w, "--"+name+" "+config.ValueType(k), config.Help(k), config.DefaultString(k))
			}
		}
	}
	var rest []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if !own[f.Name] {
			rest = append(rest, f)
		}
	})
	if len(rest) > 0 {
		fmt.Fprintf(w, "\nFlags:\n")
		for _, f := range rest {
			typ, usage := flagType(f)
			def := f.DefValue
			if typ == "BOOL" && def == "false" || def == "0" || def == "" {
				def = ""
			}
			helpLine(w, "--"+f.Name+" "+typ, usage, def)
		}
	}
}

// helpLine writes one flag: name and type in a column, the help wrapped beside it.
func helpLine(w io.Writer, left, help, def string) {
	const col, width = 34, 100
	if def != "" {
		help += " (default " + def + ")"
	}
	words := strings.Fields(help)
	line := "    " + left
	if utf8.RuneCountInString(line) >= col-1 {
		fmt.Fprintln(w, line)
		line = ""
	}
	pad := func() { line += strings.Repeat(" ", col-utf8.RuneCountInString(line)) }
	pad()
	n := 0
	for _, word := range words {
		if n > 0 && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) > width {
			fmt.Fprintln(w, strings.TrimRight(line, " "))
			line, n = "", 0
			pad()
		}
		if n > 0 {
			line += " "
		}
		line += word
		n++
	}
	fmt.Fprintln(w, strings.TrimRight(line, " "))
}

// flagType names a non-config flag's value (BOOL, DURATION, N, or the back-quoted word of
// its usage) and returns the usage without the quotes.
func flagType(f *flag.Flag) (string, string) {
	name, usage := flag.UnquoteUsage(f)
	if isBool, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && isBool.IsBoolFlag() {
		return "BOOL", usage
	}
	switch reflect.TypeOf(f.Value).String() {
	case "*flag.durationValue":
		return "DURATION", usage
	case "*flag.intValue", "*flag.int64Value", "*flag.uintValue":
		return "N", usage
	}
	if name == "" || name == "value" || name == "string" {
		return "STRING", usage
	}
	return strings.ToUpper(name), usage
}

// termSafe makes a string from a peer (a client's name, a tool, a status message) safe to
// print on a terminal: control and format characters (escape sequences, carriage returns,
// bidirectional overrides) and invalid UTF-8 are shown as \x.. or \u.... escapes.
func termSafe(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x80 && (r < 0x20 || r == 0x7f):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

func needsEscape(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || r < 0x20 || r == 0x7f || unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			return true
		}
	}
	return false
}

// warnUnknownEnv prints a warning on w for each misspelled TASKBRIDGE_* variable.
func warnUnknownEnv(w io.Writer, environ []string) {
	for _, msg := range config.UnknownEnv(environ) {
		fmt.Fprintln(w, "taskbridge: warning:", msg)
	}
}
