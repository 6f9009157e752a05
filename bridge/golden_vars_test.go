package bridge_test

// The golden runner's variables and semantic JSON matching (golden_test.go).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/tidwall/gjson"
)

// ---- variables and JSON matching -----------------------------------------------------

var varName = regexp.MustCompile(`^\$[A-Z][A-Z0-9_]*$`)

const (
	anyValue    = "$ANY"    // matches every value
	absentValue = "$ABSENT" // as an object member: the key must not be there
)

func isVar(s string) bool { return varName.MatchString(s) && s != anyValue && s != absentValue }

// vars holds the "$NAME" bindings shared by the client and upstream sides.
type vars struct {
	mu sync.Mutex
	m  map[string]any
}

// match compares got with the pattern want and returns the differences. Variables bind
// only when everything matched, unless lenient (-update), which keeps what it could bind.
// subset allows members of got that want does not mention (upstream ">>" lines).
func (v *vars) match(want, got any, subset, lenient bool) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	m := &matcher{bound: v.m, tent: map[string]any{}, subset: subset}
	m.walk("$", want, got)
	if len(m.diffs) == 0 || lenient {
		for k, x := range m.tent {
			v.m[k] = x
		}
	}
	return m.diffs
}

type matcher struct {
	bound, tent map[string]any
	subset      bool
	diffs       []string
}

func (m *matcher) walk(path string, want, got any) {
	switch w := want.(type) {
	case string:
		if w == anyValue {
			return
		}
		if isVar(w) {
			if b, ok := m.bound[w]; ok {
				m.check(path, b, got, " (the value of "+w+")")
			} else if b, ok := m.tent[w]; ok {
				m.check(path, b, got, " (the value of "+w+")")
			} else {
				m.tent[w] = got
			}
			return
		}
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			m.diffs = append(m.diffs, fmt.Sprintf("%s: want an object, got %s", path, compact(got)))
			return
		}
		for _, k := range sortedKeys(w) {
			gv, has := g[k]
			switch {
			case w[k] == absentValue && has:
				m.diffs = append(m.diffs, fmt.Sprintf("%s.%s: want no such member, got %s", path, k, compact(gv)))
			case w[k] == absentValue:
			case !has:
				m.diffs = append(m.diffs, fmt.Sprintf("%s.%s: missing (want %s)", path, k, compact(w[k])))
			default:
				m.walk(path+"."+k, w[k], gv)
			}
		}
		if !m.subset {
			for _, k := range sortedKeys(g) {
				if _, ok := w[k]; !ok {
					m.diffs = append(m.diffs, fmt.Sprintf("%s.%s: unexpected member %s", path, k, compact(g[k])))
				}
			}
		}
		return
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			m.diffs = append(m.diffs, fmt.Sprintf("%s: want %s, got %s", path, compact(want), compact(got)))
			return
		}
		for i := range w {
			m.walk(path+"["+strconv.Itoa(i)+"]", w[i], g[i])
		}
		return
	}
	m.check(path, want, got, "")
}

func (m *matcher) check(path string, want, got any, note string) {
	if !equalJSON(want, got) {
		m.diffs = append(m.diffs, fmt.Sprintf("%s: want %s%s, got %s", path, compact(want), note, compact(got)))
	}
}

// equalJSON compares decoded JSON values semantically (numbers by value).
func equalJSON(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		fx, ex := x.Float64()
		fy, ey := y.Float64()
		return x == y || (ex == nil && ey == nil && fx == fy)
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k := range x {
			if yv, ok := y[k]; !ok || !equalJSON(x[k], yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// subst returns the JSON text raw with every bound "$NAME" string replaced by its value;
// members keep the order they were written in.
func (v *vars) subst(raw string) (string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var walk func(r gjson.Result) (string, error)
	walk = func(r gjson.Result) (string, error) {
		var parts []string
		var err error
		each := func(k, e gjson.Result) bool {
			var s string
			if s, err = walk(e); err == nil && r.IsObject() {
				s = k.Raw + ":" + s
			}
			parts = append(parts, s)
			return err == nil
		}
		switch {
		case r.Type == gjson.String && (r.Str == anyValue || r.Str == absentValue):
			return "", fmt.Errorf("%s cannot be sent", r.Str)
		case r.Type == gjson.String && isVar(r.Str):
			b, ok := v.m[r.Str]
			if !ok {
				return "", fmt.Errorf("variable %s is not bound yet", r.Str)
			}
			return compact(b), nil
		case r.IsObject():
			r.ForEach(each)
			return "{" + strings.Join(parts, ",") + "}", err
		case r.IsArray():
			r.ForEach(each)
			return "[" + strings.Join(parts, ",") + "]", err
		}
		return r.Raw, nil
	}
	return walk(gjson.Parse(raw))
}

// rewrite renders a received message for -update, in the order it arrived: bound values
// become their "$NAME" again, createdAt/lastUpdatedAt and places want left as "$ANY" become
// "$ANY".
func (v *vars) rewrite(want any, got gjson.Result, key string) string {
	if key == "createdAt" || key == "lastUpdatedAt" || want == anyValue {
		return strconv.Quote(anyValue)
	}
	v.mu.Lock()
	if s, ok := want.(string); ok && isVar(s) && equalJSON(v.m[s], decodeJSON(got.Raw)) {
		v.mu.Unlock()
		return strconv.Quote(s)
	}
	if got.Type == gjson.String {
		for _, name := range sortedKeys(v.m) {
			if v.m[name] == got.Str {
				v.mu.Unlock()
				return strconv.Quote(name)
			}
		}
	}
	v.mu.Unlock()
	var parts []string
	switch {
	case got.IsObject():
		wm, _ := want.(map[string]any)
		got.ForEach(func(k, e gjson.Result) bool {
			parts = append(parts, strconv.Quote(k.Str)+":"+v.rewrite(wm[k.Str], e, k.Str))
			return true
		})
		return "{" + strings.Join(parts, ",") + "}"
	case got.IsArray():
		wa, _ := want.([]any)
		for i, e := range got.Array() {
			var w any
			if i < len(wa) {
				w = wa[i]
			}
			parts = append(parts, v.rewrite(w, e, ""))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	var buf bytes.Buffer
	_ = json.Compact(&buf, []byte(got.Raw))
	return buf.String()
}

func decodeJSON(s string) any {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	return v
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
