package runtime

import "github.com/lockgen/lockgen/internal/keys"

// A fenced lock is a reentrant Lock whose every hold carries a fencing
// token (Lease.Token). The tokens come from a counter of their own, the
// lock's key with the suffix ":fence", which never expires: tokens keep
// increasing across the whole life of the lock, also after its key
// expired or was deleted. Deleting the counter itself restarts them, so
// don't.

// fencedKeys returns the keys of a fenced lock's scripts: the lock and its
// fence counter.
func (l *Lock) fencedKeys() []string { return []string{l.key, keys.Sub(l.key, "fence")} }
