package testenv

import (
	"bytes"
	"io"
	"sync"

	"github.com/tidwall/gjson"
)

// ServeBanner is the start-up event "taskbridge serve" logs on stderr once it listens: a
// JSON line with message "taskbridge listening" naming its endpoints.
type ServeBanner struct {
	MCP   string // http://ADDR/mcp
	Admin string // http://ADDR, "" without an admin listener
}

// WatchServeLog returns a writer to use as a serve process's stderr: it copies every byte
// to w (a log file, a buffer) and sends the banner on the channel once it is written.
// Use it with --log-format json (the default off a terminal).
func WatchServeLog(w io.Writer) (io.Writer, <-chan ServeBanner) {
	ch := make(chan ServeBanner, 1)
	return &bannerWatcher{w: w, ch: ch}, ch
}

// bannerWatcher splits the stream into lines until the banner is found. mu guards buf and
// found (os/exec writes from one goroutine, but a test may share the writer).
type bannerWatcher struct {
	w  io.Writer
	ch chan ServeBanner

	mu    sync.Mutex
	buf   []byte
	found bool
}

func (b *bannerWatcher) Write(p []byte) (int, error) {
	b.mu.Lock()
	if !b.found {
		b.buf = append(b.buf, p...)
		for {
			i := bytes.IndexByte(b.buf, '\n')
			if i < 0 {
				break
			}
			line := b.buf[:i]
			b.buf = b.buf[i+1:]
			if gjson.GetBytes(line, "message").Str == "taskbridge listening" {
				b.found, b.buf = true, nil
				b.ch <- ServeBanner{MCP: gjson.GetBytes(line, "mcp").Str, Admin: gjson.GetBytes(line, "admin").Str}
				break
			}
		}
	}
	b.mu.Unlock()
	return b.w.Write(p)
}
