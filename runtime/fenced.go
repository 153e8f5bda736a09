package runtime

import (
	"errors"
	"fmt"
	"sync"
)

// A fenced lock is a reentrant Lock whose every hold carries a fencing
// token (Lease.Token). The tokens come from a counter of their own, the
// lock's key with the suffix ":fence", which never expires: tokens keep
// increasing across the whole life of the lock, also after its key
// expired or was deleted. Deleting the counter itself restarts them, so
// don't.

// ErrFenceReset: a fenced lock was taken with a token no larger than one
// this client saw for the lock before, so the lock's fence counter went
// back: Redis restarted without the counter (no persistence, or an AOF
// that had not yet written it), failed over to a replica that had not
// received it, or the counter was deleted. Storage that saw the larger
// tokens would refuse the new holder's writes, and accept a stale
// holder's. Lock and TryLock return it (wrapped, with both tokens) and
// hold nothing: the hold is released. The client then accepts the new
// counter, so the next Lock succeeds with tokens counting up from it; see
// "Fenced locks" in docs/design.md for what to do.
var ErrFenceReset = errors.New("lockgen: fence counter went back")

// maxFences bounds how many fenced locks a client remembers the last
// token of.
const maxFences = 10_000

// fences remembers the largest fencing token a client saw per fenced lock.
type fences struct {
	mu   sync.Mutex
	last map[string]int64
}

// check records token, taken for a new hold (holds == 1) or a re-entry of
// key, and returns an error matching ErrFenceReset when a new hold's token
// is not larger than the last one seen for key.
func (f *fences) check(key string, holds, token int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last == nil {
		f.last = map[string]int64{}
	}
	last, seen := f.last[key]
	if !seen && len(f.last) >= maxFences {
		for k := range f.last { // forget one at random
			delete(f.last, k)
			break
		}
	}
	f.last[key] = token
	if seen && holds == 1 && token <= last {
		return fmt.Errorf("%w: %s drew token %d after %d", ErrFenceReset, key, token, last)
	}
	if token < last {
		f.last[key] = last
	}
	return nil
}
