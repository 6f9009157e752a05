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

// NewestGetStream names the session's newest GET stream in this process: a number that
// changes whenever the client opens another one, 0 when it holds none. A message pushed
// when the client had no stream, or on a stream it lost, can so be pushed again on the one
// it opened since (the legacy pass-through's questions), without repeating it on a stream
// that already carried it.
func (s *Server) NewestGetStream(sessionID string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.streams[sessionID]
	if len(list) == 0 {
		return 0
	}
	return list[len(list)-1].seq
}
