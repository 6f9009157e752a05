// Package taskbridge_test holds the floor-plan test: it reads architecture.yaml and checks the
// module against it (forbidden imports, placed packages, package doc comments, file sizes).
// The model is tailscale's pkgdoc_test.go: the architecture is a test, not a convention.
package taskbridge_test

import (
	"bufio"
	"bytes"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// floorPlan is architecture.yaml.
type floorPlan struct {
	Module   string `yaml:"module"`
	MaxLines int    `yaml:"max_lines"`
	Parts    []struct {
		Name     string   `yaml:"name"`
		Packages []string `yaml:"packages"`
		What     string   `yaml:"what"`
	} `yaml:"parts"`
	Rules []rule `yaml:"rules"`
}

type rule struct {
	Packages  []string `yaml:"packages"`
	Forbid    []string `yaml:"forbid"`
	ForbidStd []string `yaml:"forbid_std"`
	Why       string   `yaml:"why"`
}

// pkgFiles is what the test reads of one package directory.
type pkgFiles struct {
	rel     string              // module-relative path ("" for the root)
	imports map[string][]string // import path → non-test files importing it
	hasDoc  bool                // some non-test file has a package doc comment
	files   map[string]int      // non-test file → line count
}

// match reports whether a module-relative package path matches a pattern ("x" or "x/...").
func match(pattern, rel string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return rel == base || strings.HasPrefix(rel, base+"/")
	}
	return rel == pattern
}

func matchAny(patterns []string, rel string) bool {
	for _, p := range patterns {
		if match(p, rel) {
			return true
		}
	}
	return false
}

// violations lists the forbidden imports of one package under the plan's rules.
func (fp *floorPlan) violations(p *pkgFiles) []string {
	var out []string
	for imp, files := range p.imports {
		own, isOwn := strings.CutPrefix(imp, fp.Module+"/")
		for _, r := range fp.Rules {
			if !matchAny(r.Packages, p.rel) {
				continue
			}
			bad := (isOwn && own != p.rel && matchAny(r.Forbid, own)) ||
				(!isOwn && !strings.Contains(strings.Split(imp, "/")[0], ".") && matchAny(r.ForbidStd, imp))
			if bad {
				out = append(out, fmt.Sprintf("%s imports %s (%s): %s", p.rel, imp, strings.Join(files, ", "), r.Why))
			}
		}
	}
	sort.Strings(out)
	return out
}

func (fp *floorPlan) placed(rel string) bool {
	for _, part := range fp.Parts {
		if matchAny(part.Packages, rel) {
			return true
		}
	}
	return false
}

func readPlan(t *testing.T) *floorPlan {
	t.Helper()
	b, err := os.ReadFile("architecture.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var fp floorPlan
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&fp); err != nil {
		t.Fatalf("architecture.yaml: %v", err)
	}
	if fp.Module == "" || fp.MaxLines <= 0 || len(fp.Parts) == 0 {
		t.Fatal("architecture.yaml: module, max_lines and parts are required")
	}
	return &fp
}

// readModule parses the imports and package comments of every non-test .go file in the module
// (testdata, node_modules and hidden directories excluded).
func readModule(t *testing.T) map[string]*pkgFiles {
	t.Helper()
	pkgs := map[string]*pkgFiles{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != "." && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(filepath.Dir(path))
		if rel == "." {
			rel = ""
		}
		p := pkgs[rel]
		if p == nil {
			p = &pkgFiles{rel: rel, imports: map[string][]string{}, files: map[string]int{}}
			pkgs[rel] = p
		}
		p.hasDoc = p.hasDoc || (f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "")
		for _, is := range f.Imports {
			imp, _ := strconv.Unquote(is.Path.Value)
			p.imports[imp] = append(p.imports[imp], filepath.ToSlash(path))
		}
		n, err := countLines(path)
		p.files[filepath.ToSlash(path)] = n
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

func countLines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		n++
	}
	return n, sc.Err()
}

// TestFloorPlan checks the module against architecture.yaml.
func TestFloorPlan(t *testing.T) {
	fp := readPlan(t)
	pkgs := readModule(t)
	rels := make([]string, 0, len(pkgs))
	for rel := range pkgs {
		rels = append(rels, rel)
	}
	sort.Strings(rels)
	for _, rel := range rels {
		p := pkgs[rel]
		if rel == "" {
			continue // the module root holds only this test
		}
		if !fp.placed(rel) {
			t.Errorf("package %s is in no part of architecture.yaml: place it", rel)
		}
		if !p.hasDoc {
			t.Errorf("package %s has no package doc comment (add a doc.go)", rel)
		}
		for _, v := range fp.violations(p) {
			t.Errorf("forbidden import: %s", v)
		}
		for file, n := range p.files {
			if n > fp.MaxLines {
				t.Errorf("%s has %d lines (limit %d for non-test files): split it by concern", file, n, fp.MaxLines)
			}
		}
	}
}

// TestFloorPlanRulesCatch shows the checker can fail: a synthetic face importing the store, a
// route importing another route, and pure translation importing net/http are all reported.
func TestFloorPlanRulesCatch(t *testing.T) {
	fp := readPlan(t)
	mod := fp.Module + "/"
	for _, c := range []struct{ pkg, imp string }{
		{"legacy", mod + "store"},
		{"sep2663", mod + "legacy"},
		{"bridge/forward", mod + "bridge/reverse"},
		{"bridge/passthrough/x", mod + "bridge"},
		{"mapping", "net/http"},
		{"fallback", mod + "store/sqlite"},
		{"store/sqlite", mod + "bridge/forward"},
	} {
		p := &pkgFiles{rel: c.pkg, imports: map[string][]string{c.imp: {c.pkg + "/x.go"}}}
		if len(fp.violations(p)) == 0 {
			t.Errorf("%s importing %s is not reported", c.pkg, c.imp)
		}
	}
	ok := &pkgFiles{rel: "mapping", imports: map[string][]string{mod + "legacy": {"mapping/x.go"}, "encoding/json": {"mapping/x.go"}}}
	if v := fp.violations(ok); len(v) != 0 {
		t.Errorf("allowed imports reported: %v", v)
	}
}
