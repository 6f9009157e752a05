package jsonobj

import (
	"encoding/json"
	"testing"
)

// TestEditKeepsBytes: members that are not edited keep their order, spelling, number
// formats and escapes; edits land where the member was, or at the end.
func TestEditKeepsBytes(t *testing.T) {
	in := `{"z" : 1.50, "a":"\u00e9<", "_meta":{"k":1,"x":2}, "task":{}, "z":2}`
	cases := []struct {
		name string
		fn   func(Object) Object
		want string
	}{
		{"without", func(o Object) Object { return o.Without("task") }, `{"z":1.50,"a":"\u00e9<","_meta":{"k":1,"x":2},"z":2}`},
		{"set replaces every duplicate at the last", func(o Object) Object { return o.Set("z", json.RawMessage(`3`)) },
			`{"a":"\u00e9<","_meta":{"k":1,"x":2},"task":{},"z":3}`},
		{"set appends", func(o Object) Object { return o.Set("new", json.RawMessage(`true`)) },
			`{"z":1.50,"a":"\u00e9<","_meta":{"k":1,"x":2},"task":{},"z":2,"new":true}`},
		{"default kept", func(o Object) Object { return o.SetDefault("a", json.RawMessage(`0`)) },
			`{"z":1.50,"a":"\u00e9<","_meta":{"k":1,"x":2},"task":{},"z":2}`},
		{"meta set", func(o Object) Object { return o.SetMeta("k", json.RawMessage(`9`)) },
			`{"z":1.50,"a":"\u00e9<","_meta":{"k":9,"x":2},"task":{},"z":2}`},
		{"meta dropped when empty", func(o Object) Object { return o.DropMeta("k", "x") },
			`{"z":1.50,"a":"\u00e9<","task":{},"z":2}`},
		{"child keys", func(o Object) Object { return o.DropChildKeys("_meta", "x") },
			`{"z":1.50,"a":"\u00e9<","_meta":{"k":1},"task":{},"z":2}`},
	}
	for _, c := range cases {
		got, err := Edit([]byte(in), c.fn)
		if err != nil || string(got) != c.want {
			t.Errorf("%s: %s (%v), want %s", c.name, got, err, c.want)
		}
	}
	if v, _ := mustParse(t, in).Get("z"); string(v) != "2" {
		t.Errorf("Get reads the last duplicate: %s", v)
	}
}

func mustParse(t *testing.T, s string) Object {
	t.Helper()
	o, err := Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestParseRefuses: only one JSON object parses; ParseOrEmpty takes empty input and null.
func TestParseRefuses(t *testing.T) {
	for _, s := range []string{``, `[]`, `"x"`, `{"a":1} {}`, `{"a":}`} {
		if _, err := Parse([]byte(s)); err == nil {
			t.Errorf("Parse(%q) succeeded", s)
		}
	}
	for _, s := range []string{``, ` null `} {
		if o, err := ParseOrEmpty([]byte(s)); err != nil || len(o) != 0 {
			t.Errorf("ParseOrEmpty(%q) = %v, %v", s, o, err)
		}
	}
}
