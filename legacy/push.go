package legacy

import (
	"maps"
	"slices"
)

// Push channels: the ways this process can reach a session outside a request (its GET
// streams, or its stdio/WebSocket connection). The bridge fans upstream change
// notifications (notifications/tools/list_changed, …) out to every session that has one,
// and holds its upstream subscription only while some session does.

// PushSessions returns the ids of the sessions that have a push channel in this process,
// in no particular order.
func (s *Server) PushSessions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make(map[string]struct{}, len(s.streams)+len(s.conns))
	for id, list := range s.streams {
		if len(list) > 0 {
			ids[id] = struct{}{}
		}
	}
	for id := range s.conns {
		ids[id] = struct{}{}
	}
	return slices.Collect(maps.Keys(ids))
}
