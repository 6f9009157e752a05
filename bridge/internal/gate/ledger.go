package gate

import (
	"sync"
	"time"
)

// Ledger counts unfinished tasks per owner for the routes that keep no task records of
// their own (the pass-throughs: task ids and states travel through untouched). A route
// tells it what it sees pass: a task created (Started), a task seen terminal (Ended), a
// session gone (EndGroup). A task the route never sees end is counted until its ttl (at
// most MaxLedgerTTL) runs out, so a lost terminal answer costs the owner a slot for a
// while, never for ever.
//
// Nothing is recorded while the policy has no concurrency cap, and the ledger holds at
// most MaxLedgerEntries tasks (when full, the entry nearest its expiry goes first): it is
// bounded whatever clients do.
//
// Concurrency: safe for concurrent use; mu guards every field below it.
type Ledger struct {
	g *Gate

	mu      sync.Mutex
	tasks   map[string]*ledgerEntry            // route's task key → entry
	byOwner map[string]map[string]*ledgerEntry // owner → its entries by key
}

type ledgerEntry struct {
	owner, group string
	expires      time.Time
}

// Bounds of a Ledger.
const (
	MaxLedgerEntries = 100_000
	MaxLedgerTTL     = 24 * time.Hour
)

// NewLedger returns an empty ledger that records while g's policy caps concurrency.
func NewLedger(g *Gate) *Ledger {
	return &Ledger{g: g, tasks: map[string]*ledgerEntry{}, byOwner: map[string]map[string]*ledgerEntry{}}
}

// Started records a new unfinished task of owner under key (unique on the route; group
// names what ends it wholesale, e.g. its session). ttl <= 0 or above MaxLedgerTTL counts
// as MaxLedgerTTL.
func (l *Ledger) Started(owner, group, key string, ttl time.Duration) {
	if l.g.Policy().MaxConcurrentTasks <= 0 {
		return
	}
	if ttl <= 0 || ttl > MaxLedgerTTL {
		ttl = MaxLedgerTTL
	}
	now := l.g.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.tasks[key]; ok {
		return
	}
	if len(l.tasks) >= MaxLedgerEntries {
		l.sweepLocked(now)
	}
	if len(l.tasks) >= MaxLedgerEntries {
		l.dropSoonestLocked()
	}
	e := &ledgerEntry{owner: owner, group: group, expires: now.Add(ttl)}
	l.tasks[key] = e
	if l.byOwner[owner] == nil {
		l.byOwner[owner] = map[string]*ledgerEntry{}
	}
	l.byOwner[owner][key] = e
}

// Ended forgets the task under key (seen terminal, or gone upstream).
func (l *Ledger) Ended(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.tasks[key]; ok {
		l.deleteLocked(key, e)
	}
}

// EndGroup forgets every task of group.
func (l *Ledger) EndGroup(group string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, e := range l.tasks {
		if e.group == group {
			l.deleteLocked(k, e)
		}
	}
}

// Active returns owner's unfinished tasks, dropping the expired ones first.
func (l *Ledger) Active(owner string) int {
	now := l.g.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, e := range l.byOwner[owner] {
		if !now.Before(e.expires) {
			l.deleteLocked(k, e)
		}
	}
	return len(l.byOwner[owner])
}

func (l *Ledger) deleteLocked(key string, e *ledgerEntry) {
	delete(l.tasks, key)
	if mine := l.byOwner[e.owner]; mine != nil {
		delete(mine, key)
		if len(mine) == 0 {
			delete(l.byOwner, e.owner)
		}
	}
}

func (l *Ledger) sweepLocked(now time.Time) {
	for k, e := range l.tasks {
		if !now.Before(e.expires) {
			l.deleteLocked(k, e)
		}
	}
}

func (l *Ledger) dropSoonestLocked() {
	var key string
	var soonest *ledgerEntry
	for k, e := range l.tasks {
		if soonest == nil || e.expires.Before(soonest.expires) {
			key, soonest = k, e
		}
	}
	if soonest != nil {
		l.deleteLocked(key, soonest)
	}
}
