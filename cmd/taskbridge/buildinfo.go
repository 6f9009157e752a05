package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// version is the release version. scripts/release.sh stamps it (-X main.version=v1.2.3);
// otherwise init takes the module version that "go install …@v1.2.3" records in the build
// info, and a build from a checkout stays "dev".
var version = "dev"

// revision is the VCS revision stamped by scripts/release.sh (-X main.revision=…), for
// builds where go records none: a git worktree (go stamps only where .git is a directory),
// or -buildvcs=false. Empty otherwise; the build info's vcs.revision is used then.
var revision = ""

// buildDate is the UTC build time stamped by scripts/release.sh (-X main.buildDate=…);
// empty for a plain go build or go install, which record no build time.
var buildDate = ""

func init() {
	if version != "dev" {
		return
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		version = bi.Main.Version
	}
}

// buildFacts is what "taskbridge version" prints: every field has a value, "unknown" when
// the build did not record it.
type buildFacts struct {
	Version, Module, ModuleVersion, Revision, CommitTime, BuildDate, Go, Platform string
}

// readBuildFacts combines the stamped values with runtime/debug.ReadBuildInfo: the module
// path and version, and the VCS revision and commit time that go build records in a checkout
// (with "+dirty" when the tree had uncommitted changes).
func readBuildFacts() buildFacts {
	f := buildFacts{Version: version, Module: "unknown", ModuleVersion: "unknown", Revision: "unknown",
		CommitTime: "unknown", BuildDate: "unknown (not stamped; scripts/release.sh stamps it)",
		Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if buildDate != "" {
		f.BuildDate = buildDate
	}
	if revision != "" {
		f.Revision = revision
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return f
	}
	if bi.Main.Path != "" {
		f.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		f.ModuleVersion = bi.Main.Version
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if r := settings["vcs.revision"]; r != "" {
		f.Revision = r
		if settings["vcs.modified"] == "true" {
			f.Revision += "+dirty"
		}
	}
	if t := settings["vcs.time"]; t != "" {
		f.CommitTime = t
	}
	if revision != "" {
		f.Revision = revision
	}
	return f
}

// printVersion writes the build facts, one "key: value" line each after the first.
func printVersion(w io.Writer) {
	f := readBuildFacts()
	var b strings.Builder
	fmt.Fprintf(&b, "taskbridge %s\n", f.Version)
	fmt.Fprintf(&b, "module:      %s %s\n", f.Module, f.ModuleVersion)
	fmt.Fprintf(&b, "revision:    %s\n", f.Revision)
	fmt.Fprintf(&b, "commit time: %s\n", f.CommitTime)
	fmt.Fprintf(&b, "build date:  %s\n", f.BuildDate)
	fmt.Fprintf(&b, "go:          %s %s\n", f.Go, f.Platform)
	io.WriteString(w, b.String())
}
