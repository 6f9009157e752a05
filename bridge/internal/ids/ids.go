// Package ids mints the identifiers the routes hand out: task ids (128 random bits, never
// derived from an upstream's id, so ids cannot be guessed or correlated) and the ids of
// server→client requests the bridge relays to a client.
package ids

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// NewTaskID mints a task id: 128 random bits, hex.
func NewTaskID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // the platform is broken; ids must not be weak
	}
	return hex.EncodeToString(b[:])
}

// NewRequestID mints the id of a server→client request (an input relayed to the client).
func NewRequestID() string { return "tb-" + NewTaskID() }
