package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
)

// toolCounts is what -count-file holds: per tool, how often its handler started ("runs"),
// returned a result or error ("finished"), and stopped because it was cancelled
// ("cancelled"). Tests read it to assert "ran once" and "cancel stopped the work".
type toolCounts struct {
	Runs      int `json:"runs"`
	Finished  int `json:"finished"`
	Cancelled int `json:"cancelled"`
}

// counter keeps the counts and rewrites the file (write to a temporary file, then rename,
// so a reader never sees half a file) after every change.
type counter struct {
	mu   sync.Mutex
	path string
	m    map[string]*toolCounts
}

func newCounter(path string) (*counter, error) {
	c := &counter{path: path, m: map[string]*toolCounts{}}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c, c.writeLocked()
}

// add applies f to tool's counts and rewrites the file. A write error is reported on stderr:
// the count file is a test aid, not part of the server's answers.
func (c *counter) add(tool string, f func(*toolCounts)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tc := c.m[tool]
	if tc == nil {
		tc = &toolCounts{}
		c.m[tool] = tc
	}
	f(tc)
	if err := c.writeLocked(); err != nil {
		logf("count file: %v", err)
	}
}

func (c *counter) writeLocked() error {
	if c.path == "" {
		return nil
	}
	b, err := json.Marshal(c.m)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), ".counts-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), c.path)
}
