package bridge

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
)

// modernPassThrough serves 2026-07-28 clients in front of a 2026-07-28 upstream (same
// era, design §1): after the face validated the envelope, the request goes upstream with
// the client's own _meta and params, and the upstream's result comes back unchanged (task
// ids included: no translation happens on this route).
type modernPassThrough struct{ up *sep2663.Client }

// Serve implements sep2663.Handler.
func (m modernPassThrough) Serve(ctx context.Context, req *sep2663.Request) (json.RawMessage, error) {
	res, err := m.up.Call(ctx, req.Method, req.Params, sep2663.RequestMeta{}, nil)
	if err != nil {
		return nil, upstreamErr(err)
	}
	return res, nil
}

// routedHandler is the forward bridge's one /mcp: modern requests pass through to the
// modern upstream, everything else goes to the legacy face (translation).
func (b *Bridge) routedHandler() http.Handler {
	maxBody := b.cfg.MaxBodyBytes
	if maxBody <= 0 {
		maxBody = legacy.DefaultMaxBodyBytes
	}
	modern := sep2663.NewServer(sep2663.ServerOptions{
		Handler: modernPassThrough{up: b.up}, AllowedOrigins: b.cfg.AllowedOrigins, MaxBodyBytes: maxBody,
	})
	return RouteEras(modern, b.face, maxBody)
}
