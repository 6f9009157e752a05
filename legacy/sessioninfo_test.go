package legacy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// TestSessionInfoBounded: a clientInfo over max_session_info_bytes is stored as its name,
// version and title (each cut at a character boundary), everything else dropped; the
// session works. Capabilities over the bound refuse initialize with -32602 naming the
// limit, and nothing is stored. Under the bound both are kept byte for byte.
func TestSessionInfoBounded(t *testing.T) {
	const limit = 4096
	e := newEnv(t, func(o *Options) { o.MaxSessionInfoBytes = limit })
	init := func(caps, info string) (*http.Response, string) {
		return e.post("", fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":%s,"clientInfo":%s}}`, caps, info))
	}

	small := `{"name":"claude-code","version":"2.1.0","icons":[{"src":"https://example.com/i.png"}]}`
	resp, body := init(`{"elicitation":{}}`, small)
	sess, ok := e.st.session(resp.Header.Get("Mcp-Session-Id"))
	if resp.StatusCode != http.StatusOK || !ok || string(sess.ClientInfo) != small || string(sess.ClientCapabilities) != `{"elicitation":{}}` {
		t.Fatalf("small initialize: %d %s; stored %q %q", resp.StatusCode, body, sess.ClientInfo, sess.ClientCapabilities)
	}

	name := strings.Repeat("é", 1000) // 2 bytes each: a cut must not split one
	big := fmt.Sprintf(`{"name":%q,"version":"1.0.0","title":"<Tool & Co>","icons":[{"src":"data:image/png;base64,%s"}],"description":7}`,
		name, strings.Repeat("A", 1<<20))
	resp, body = init(`{}`, big)
	sess, ok = e.st.session(resp.Header.Get("Mcp-Session-Id"))
	if resp.StatusCode != http.StatusOK || !ok {
		t.Fatalf("initialize with a 1 MiB clientInfo: %d %s", resp.StatusCode, body)
	}
	info := gjson.ParseBytes(sess.ClientInfo)
	if len(sess.ClientInfo) > 1024 || !utf8.Valid(sess.ClientInfo) || info.Get("version").Str != "1.0.0" ||
		info.Get("title").Str != "<Tool & Co>" || info.Get("icons").Exists() || info.Get("description").Exists() {
		t.Errorf("stored clientInfo (%d bytes) = %.200s…", len(sess.ClientInfo), sess.ClientInfo)
	}
	if n := info.Get("name").Str; len(n) != clientInfoFieldMax || !strings.HasPrefix(name, n) {
		t.Errorf("stored name: %d bytes, want the first %d bytes of the sent one", len(n), clientInfoFieldMax)
	}

	count := func() int { e.st.mu.Lock(); defer e.st.mu.Unlock(); return len(e.st.sessions) }
	before := count()
	resp, body = init(fmt.Sprintf(`{"experimental":{"x":%q}}`, strings.Repeat("y", limit)), small)
	je := gjson.Get(body, "error")
	if resp.Header.Get("Mcp-Session-Id") != "" || je.Get("code").Int() != -32602 ||
		!strings.Contains(je.Get("message").Str, "params.capabilities is 4121 bytes; this bridge accepts at most 4096 (max_session_info_bytes)") {
		t.Errorf("initialize with oversized capabilities: %d %s, want a -32602 error and no session", resp.StatusCode, body)
	}
	if count() != before {
		t.Errorf("a refused initialize stored a session")
	}
}
