package mapping

import "testing"

// TestInputCaps: the set read from either era's client capabilities, its canonical
// 2025-11-25 form (the upstream's initialize), and the capability an input request lacks
// (issue 16 items 6 and 17: a URL-mode elicitation names elicitation.url).
func TestInputCaps(t *testing.T) {
	for _, c := range []struct{ caps, legacy string }{
		{``, `{}`},
		{`{}`, `{}`},
		{`{"elicitation":{}}`, `{"elicitation":{"form":{}}}`},
		{`{"elicitation":{"url":{}}}`, `{"elicitation":{"url":{}}}`},
		{`{"sampling":{"tools":{}},"roots":{"listChanged":true},"elicitation":{"url":{},"form":{}},"experimental":{"x":{}}}`,
			`{"elicitation":{"form":{},"url":{}},"roots":{},"sampling":{"tools":{}}}`},
		{`{"sampling":true,"roots":[]}`, `{}`},
	} {
		if got := InputCapsOf([]byte(c.caps)).String(); got != c.legacy {
			t.Errorf("%s: %s, want %s", c.caps, got, c.legacy)
		}
	}
	for _, c := range []struct{ caps, method, params, need string }{
		{`{}`, "elicitation/create", `{"message":"?"}`, "elicitation"},
		{`{}`, "elicitation/create", `{"mode":"url","url":"https://x"}`, "elicitation.url"},
		{`{"elicitation":{"form":{}}}`, "elicitation/create", `{"mode":"url"}`, "elicitation.url"},
		{`{"elicitation":{"url":{}}}`, "elicitation/create", `{"message":"?"}`, "elicitation.form"},
		{`{"elicitation":{}}`, "elicitation/create", `{"mode":"form"}`, ""},
		{`{"elicitation":{}}`, "sampling/createMessage", `{}`, "sampling"},
		{`{"sampling":{}}`, "sampling/createMessage", `{"tools":[]}`, "sampling.tools"},
		{`{"sampling":{"tools":{}}}`, "sampling/createMessage", `{"tools":[]}`, ""},
		{`{"sampling":{}}`, "roots/list", `{}`, "roots"},
		{`{"roots":{}}`, "roots/list", `{}`, ""},
		{`{}`, "ping", `{}`, ""},
	} {
		if need, req := InputCapsOf([]byte(c.caps)).Missing(c.method, []byte(c.params)); need != c.need || (need != "") != (req != nil) {
			t.Errorf("%s %s %s: need %q %v, want %q", c.caps, c.method, c.params, need, req, c.need)
		}
	}
	if AllInputCaps.String() != `{"elicitation":{"form":{},"url":{}},"roots":{},"sampling":{}}` {
		t.Errorf("AllInputCaps = %s", AllInputCaps)
	}
}
