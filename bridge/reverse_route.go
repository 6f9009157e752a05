package bridge

import (
	"bytes"
	"io"
	"net/http"

	"github.com/taskbridge/taskbridge/sep2663"
)

// RouteEras returns the one /mcp handler that tells the eras apart per request (design
// §1): a POST without Mcp-Session-Id that carries the 2026-07-28 envelope (a non-legacy
// MCP-Protocol-Version header, or _meta protocolVersion in the body) goes to modern;
// everything else (initialize, session traffic, GET, DELETE) goes to legacyFace.
// At most maxBody+1 bytes are read to decide; the face sees the whole body unchanged.
func RouteEras(modern, legacyFace http.Handler, maxBody int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
			head, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
			if err != nil {
				http.Error(w, "unreadable body", http.StatusBadRequest)
				return
			}
			r.Body = readCloser{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
			if sep2663.IsModernRequest(r, head, isLegacyVersion) {
				modern.ServeHTTP(w, r)
				return
			}
		}
		legacyFace.ServeHTTP(w, r)
	})
}

type readCloser struct {
	io.Reader
	io.Closer
}
