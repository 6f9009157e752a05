package forward

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/internal/errmap"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/redact"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
)

// Custom headers from tool parameters (issue 16 item 1). On this route the bridge is the
// 2026-07-28 client, so it does what the spec asks of one: every upstream tools/call of a
// tool whose inputSchema marks parameters with x-mcp-header carries their values as
// Mcp-Param-{Name} headers (sep2663.ParamHeaderValues), and a tool whose annotations are
// invalid is left out of the tools/list a legacy client sees (and refused if called).
// The schemas come from the tools cache (route.go); a legacy client never sees any of it.

// toolParams is what the bridge knows of one tool's x-mcp-header annotations: the valid
// ones, or why the tool definition is invalid.
type toolParams struct {
	headers []sep2663.ParamHeader
	invalid error // wraps sep2663.ErrInvalidParamHeader
}

// paramsFromList reads the annotations of every tool of a tools/list result page.
func paramsFromList(res json.RawMessage) map[string]toolParams {
	out := map[string]toolParams{}
	gjson.GetBytes(res, "tools").ForEach(func(_, t gjson.Result) bool {
		name := t.Get("name")
		if name.Type != gjson.String {
			return true
		}
		hs, err := sep2663.ParamHeaders(json.RawMessage(t.Get("inputSchema").Raw))
		out[name.Str] = toolParams{headers: hs, invalid: err}
		return true
	})
	return out
}

// invalidTools names the tools of a tools/list page (annotated: paramsFromList) a
// conforming client must not offer, logging each at debug level with its reason (the
// spec's SHOULD log when rejecting).
func (b *Bridge) invalidTools(annotated map[string]toolParams) map[string]bool {
	var drop map[string]bool
	for name, tp := range annotated {
		if tp.invalid == nil {
			continue
		}
		if drop == nil {
			drop = map[string]bool{}
		}
		drop[name] = true
		b.log.Debug().Str("tool", redact.Field(name)).Str("reason", tp.invalid.Error()).
			Msg("upstream tool left out of tools/list: invalid x-mcp-header annotation")
	}
	return drop
}

// errInvalidTool is the answer to a call of a tool the bridge does not offer because its
// x-mcp-header annotations are invalid.
func errInvalidTool(name string, why error) error {
	return jsonrpc.ErrInvalidParams.Wrapf("tool %q is not offered by the bridge: %v", name, why)
}

// toolParamsFor returns the annotations of tool name. The cached tools/list is used when it
// knows the tool (however old: an upstream that disagrees answers -32020, and callTool then
// re-lists); otherwise the upstream's tools are listed first when the cache is missing or
// older than toolsTTL, or than after when after is set. An unknown tool has no headers.
func (b *Bridge) toolParamsFor(ctx context.Context, sess *legacy.Session, name string, after time.Time) toolParams {
	snap := b.fb.tools.Load()
	if snap != nil && after.IsZero() {
		if tp, ok := snap.params[name]; ok {
			return tp
		}
	}
	staleBefore := time.Now().Add(-toolsTTL)
	if after.After(staleBefore) {
		staleBefore = after
	}
	if snap == nil || snap.fetchedAt.Before(staleBefore) {
		snap = b.refreshToolsBefore(ctx, sess, staleBefore)
	}
	if snap == nil {
		return toolParams{}
	}
	return snap.params[name]
}

// callUpstreamTool sends one upstream tools/call with the session's envelope and the
// tool's Mcp-Param-* headers. When the upstream answers -32020 (its schema may have
// changed since the bridge listed it, as the spec foresees) the tools are listed again
// and, if the headers change, the call is sent once more: a -32020 means the server
// rejected the request before running anything. A -32020 that remains is renumbered for
// the 2025-11-25 client (errmap.FromModernForLegacy); other errors are returned as they
// came, for the caller's own handling.
func (b *Bridge) callUpstreamTool(ctx context.Context, sess *legacy.Session, params json.RawMessage,
	onMessage func(*jsonrpc.Message)) (*sep2663.CallToolOutcome, error) {
	name := gjson.GetBytes(params, "name").Str
	args := json.RawMessage(gjson.GetBytes(params, "arguments").Raw)
	sent := time.Now()
	tp := b.toolParamsFor(ctx, sess, name, time.Time{})
	if tp.invalid != nil {
		return nil, errInvalidTool(name, tp.invalid)
	}
	meta := b.meta(sess)
	meta.Header = sep2663.ParamHeaderValues(tp.headers, args)
	oc, err := b.up.CallTool(ctx, params, meta, onMessage)
	if !headerMismatch(err) {
		return oc, err
	}
	tp = b.toolParamsFor(ctx, sess, name, sent)
	if tp.invalid != nil {
		return nil, errInvalidTool(name, tp.invalid)
	}
	if h := sep2663.ParamHeaderValues(tp.headers, args); !sameHeader(h, meta.Header) {
		meta.Header = h
		oc, err = b.up.CallTool(ctx, params, meta, onMessage)
	}
	if headerMismatch(err) {
		return nil, errmap.FromModernForLegacy(err)
	}
	return oc, err
}

func headerMismatch(err error) bool {
	var je *jsonrpc.Error
	return errors.As(err, &je) && je.Code == jsonrpc.CodeHeaderMismatch
}

func sameHeader(a, b http.Header) bool {
	return maps.EqualFunc(a, b, func(x, y []string) bool { return slices.Equal(x, y) })
}
