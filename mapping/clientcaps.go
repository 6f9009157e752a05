package mapping

import (
	"strings"

	"github.com/tidwall/gjson"
)

// The reverse route's upstream sessions (bridge/reverse): a 2026-07-28 client declares its
// capabilities in every request's _meta, a 2025-11-25 upstream learns them once, in
// initialize. So the bridge initializes one upstream session per caller and capability
// set, declaring exactly what the caller declared (issue 16 item 6), and checks every
// input request the upstream sends against that set (MRTR: servers MUST NOT send what the
// client did not declare).

// InputCaps is the normalized set of client capabilities an upstream's input requests
// depend on: elicitation (form and URL modes), sampling (with its context and tools
// sub-capabilities) and roots. Its String form is canonical: equal sets, equal strings.
type InputCaps struct {
	ElicitForm, ElicitURL          bool
	Sampling                       bool
	SamplingContext, SamplingTools bool
	Roots                          bool
}

// InputCapsOf reads the set from a client capabilities object (either era's shape; an
// elicitation object with neither form nor url, as 2025-06-18 writes it, means form).
// Anything else in caps does not change what the upstream may ask, and is left out.
func InputCapsOf(caps []byte) InputCaps {
	var c InputCaps
	if el := gjson.GetBytes(caps, "elicitation"); el.IsObject() {
		form, url := el.Get("form").IsObject(), el.Get("url").IsObject()
		c.ElicitForm, c.ElicitURL = form || !url, url
	}
	if s := gjson.GetBytes(caps, "sampling"); s.IsObject() {
		c.Sampling, c.SamplingContext, c.SamplingTools = true, s.Get("context").IsObject(), s.Get("tools").IsObject()
	}
	c.Roots = gjson.GetBytes(caps, "roots").IsObject()
	return c
}

// AllInputCaps is the set of records written before the set was recorded: their sessions
// declared everything (legacy.DefaultClientCapabilities).
var AllInputCaps = InputCaps{ElicitForm: true, ElicitURL: true, Sampling: true, Roots: true}

// Legacy is the 2025-11-25 ClientCapabilities object declaring the set, members in a fixed
// order (the same set always gives the same bytes; it doubles as a pool key). listChanged
// of roots is never declared: the bridge relays no roots notifications.
func (c InputCaps) Legacy() []byte {
	var parts []string
	if c.ElicitForm || c.ElicitURL {
		var m []string
		if c.ElicitForm {
			m = append(m, `"form":{}`)
		}
		if c.ElicitURL {
			m = append(m, `"url":{}`)
		}
		parts = append(parts, `"elicitation":{`+strings.Join(m, ",")+`}`)
	}
	if c.Roots {
		parts = append(parts, `"roots":{}`)
	}
	if c.Sampling {
		var m []string
		if c.SamplingContext {
			m = append(m, `"context":{}`)
		}
		if c.SamplingTools {
			m = append(m, `"tools":{}`)
		}
		parts = append(parts, `"sampling":{`+strings.Join(m, ",")+`}`)
	}
	return []byte("{" + strings.Join(parts, ",") + "}")
}

// String is the canonical text of the set (Legacy's bytes).
func (c InputCaps) String() string { return string(c.Legacy()) }

// Missing names the capability an input request (method and params, as the upstream sent
// them) needs and the set lacks — "elicitation", "elicitation.form", "elicitation.url",
// "sampling", "sampling.tools" (a request with tools: 2025-11-25 MUST NOT without it) or
// "roots" — or "" when the set covers it (or the method is no input request). required is the requiredCapabilities object of a
// -32021 naming it.
func (c InputCaps) Missing(method string, params []byte) (need string, required map[string]any) {
	obj := func(k string) map[string]any { return map[string]any{k: map[string]any{}} }
	switch method {
	case "elicitation/create":
		url := gjson.GetBytes(params, "mode").Str == "url"
		switch {
		case url && !c.ElicitURL: // named even when no elicitation at all was declared
			return "elicitation.url", map[string]any{"elicitation": obj("url")}
		case !c.ElicitForm && !c.ElicitURL:
			return "elicitation", obj("elicitation")
		case !url && !c.ElicitForm:
			return "elicitation.form", map[string]any{"elicitation": obj("form")}
		}
	case "sampling/createMessage":
		switch {
		case !c.Sampling:
			return "sampling", obj("sampling")
		case (gjson.GetBytes(params, "tools").Exists() || gjson.GetBytes(params, "toolChoice").Exists()) && !c.SamplingTools:
			return "sampling.tools", map[string]any{"sampling": obj("tools")}
		}
	case "roots/list":
		if !c.Roots {
			return "roots", obj("roots")
		}
	}
	return "", nil
}
