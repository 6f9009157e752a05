package ops

import (
	"encoding/json"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// browserGuard keeps web pages away from the admin listener's state-changing endpoints
// (POST /admin/drain and any later POST): a page the operator happens to have open must not
// be able to drain the replica by submitting a form or firing a fetch at a private address.
//
// A non-GET request is refused when
//   - it carries Sec-Fetch-Site other than "same-origin" or "none" (a cross-site or
//     same-site page sent it; "none" is the user's own navigation);
//   - it carries an Origin other than the listener's own (http or https with the request's
//     Host), or its own origin is a DNS name rather than an IP literal or localhost (a page
//     that rebinds its name to the admin address is same-origin by name only);
//   - its Content-Type is anything but application/json, or it has a body without one: the
//     encodings an HTML form can send without a CORS preflight
//     (application/x-www-form-urlencoded, multipart/form-data, text/plain) never pass.
//
// Tools (curl -X POST, the CLI, a load balancer's hook) send no Origin, no Sec-Fetch-*
// header and no body, and are not affected.
func browserGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		if status, why := refuseBrowser(r); status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(map[string]string{"error": why})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Refusal reasons of browserGuard (sent as {"error": …}).
const (
	whyCrossSite   = "cross-site request refused: the admin endpoints do not serve web pages"
	whyOrigin      = "request from another origin refused: the admin endpoints do not serve web pages"
	whyContentType = "unsupported Content-Type: send no body, or application/json"
)

// refuseBrowser returns the HTTP status and reason to refuse r with, or 0.
func refuseBrowser(r *http.Request) (int, string) {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		return http.StatusForbidden, whyCrossSite
	}
	if o := r.Header.Get("Origin"); o != "" && !ownOrigin(o, r.Host) {
		return http.StatusForbidden, whyOrigin
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		if r.ContentLength != 0 {
			return http.StatusUnsupportedMediaType, whyContentType
		}
		return 0, ""
	}
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return http.StatusUnsupportedMediaType, whyContentType
	}
	return 0, ""
}

// ownOrigin reports whether origin is the listener's own, as reached at host (the Host
// header), and that host is an address no page can rebind: an IP literal or localhost.
// "null" (a sandboxed or file: page) is never the listener's own.
func ownOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Path != "" || u.Host == "" {
		return false
	}
	if !strings.EqualFold(u.Host, host) {
		return false
	}
	name := u.Hostname()
	return strings.EqualFold(name, "localhost") || net.ParseIP(name) != nil
}
