package runtime

import (
	"sync"
	"time"
)

// contendedFor is how long a client takes an object it found held by
// another owner (an attempt that had to wait, or a hand-off it was
// given) for contended: a new owner's first attempt on it within that
// time skips the acquire script's uncontended check (see contention).
const contendedFor = 2 * time.Second

// maxContended bounds how many objects a client remembers as contended.
const maxContended = 10_000

// contention remembers the objects (by key) this client found contended
// lately. The acquire scripts of fair and read-write locks and of
// semaphores start with a check that nothing is held and nobody waits
// (one EXISTS), for the uncontended fast path; on an object other
// owners keep taking turns on, it fails, and the attempt that follows
// reads what it needs anyway. A first attempt on an object this client
// found contended within contendedFor asks the script to skip the check
// (the registered flag '3'): one command less per contended
// acquisition. Guessing wrong costs the slow path once (a few commands
// more than the fast path's).
type contention struct {
	mu   sync.Mutex
	seen map[string]int64 // key -> when last found contended (UnixNano)
}

// saw records key as contended now.
func (c *contention) saw(key string) {
	now := time.Now().UnixNano()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]int64{}
	}
	if _, ok := c.seen[key]; !ok && len(c.seen) >= maxContended {
		for k, at := range c.seen { // forget the stale, or one at random
			if now-at >= int64(contendedFor) || len(c.seen) >= maxContended {
				delete(c.seen, k)
			}
		}
	}
	c.seen[key] = now
}

// recently reports whether key was found contended within contendedFor.
func (c *contention) recently(key string) bool {
	c.mu.Lock()
	at, ok := c.seen[key]
	c.mu.Unlock()
	return ok && time.Now().UnixNano()-at < int64(contendedFor)
}
