// Package templates holds lockgen's Lua scripts, one file per script, and
// says which scripts implement which object kind.
//
// Calling convention of the lock scripts (every lock kind follows it, so the
// runtime drives them the same way; the waiter registry, queue and waiters,
// is described in runtime's package doc, "Waiter registry", and its code
// is registry.luainc, included by the scripts that use it):
//
//	acquire(KEYS: lock, queue, waiters; ARGV: lease ms, owner, registry TTL ms (0: do not register), '1' if registered, '2' to refresh the registered entry (a full attempt when the lock is free or handed to the owner)) -> {1, holds} | {0, pttl} | {-1, pttl} (held by this owner, not reentrant)
//	release(KEYS: lock, queue, waiters; ARGV: owner, lease ms, channel prefix, publish command, hand-off lease ms, '1' if giving up a wait) -> -1 not held | n > 0 holds left | 0 released (and handed on when someone waits)
//	renew(KEYS[1]=lock; ARGV: lease ms, owner) -> 1 renewed | 0 not held
//	force_unlock(KEYS: lock, queue, waiters; ARGV: channel prefix, publish command) -> 1 deleted | 0 not held
//
// Kinds with more keys pass them after these (all in the lock's slot):
// fenced its fence counter (KEYS[4]), fair its queue and waiter
// deadlines; readwrite has its hold deadlines second (KEYS: lock, holds,
// queue, waiters), and its acquire takes the fair acquire's ARGV too. A fenced acquire returns
// {1, holds, token}; a fair acquire takes ARGV[5..7] the channel prefix,
// publish command and hand-off lease ms (it hands a free lock to the
// first live waiter), and every kind's waiter that gives up leaves through
// release (ARGV[6] '1'), no script of its own; readwrite scripts take the side
// ("r" or "w") as their last ARGV, and acquire returns {-2, 0} for an
// upgrade. A RedLock node runs simple_acquire without a registry and
// redlock_release, which always publishes: its waiters wait for a
// majority of the nodes' messages.
package templates

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed *.lua *.luainc
var files embed.FS

// LockSet names the scripts of one lock kind.
type LockSet struct {
	Acquire, Release, Renew, ForceUnlock string
	// MultiAcquire and MultiRelease take and release several locks of
	// the kinds that have them in one script (a MultiLock on one slot).
	MultiAcquire, MultiRelease string
}

// Names returns the set's script names in a fixed order.
func (s LockSet) Names() []string {
	names := []string{s.Acquire, s.Release, s.Renew, s.ForceUnlock}
	if s.MultiAcquire != "" {
		names = append(names, s.MultiAcquire, s.MultiRelease)
	}
	return names
}

// Locks maps each implemented lock kind (as written in a spec) to its scripts.
var Locks = map[string]LockSet{
	"reentrant": {Acquire: "reentrant_acquire", Release: "reentrant_release", Renew: "reentrant_renew", ForceUnlock: "force_unlock", MultiAcquire: "multi_acquire", MultiRelease: "multi_release"},
	"simple":    {Acquire: "simple_acquire", Release: "simple_release", Renew: "simple_renew", ForceUnlock: "force_unlock", MultiAcquire: "multi_acquire", MultiRelease: "multi_release"},
	"fair":      {Acquire: "fair_acquire", Release: "fair_release", Renew: "fair_renew", ForceUnlock: "fair_force_unlock"},
	"readwrite": {Acquire: "rw_acquire", Release: "rw_release", Renew: "rw_renew", ForceUnlock: "rw_force_unlock"},
	"fenced":    {Acquire: "fenced_acquire", Release: "reentrant_release", Renew: "reentrant_renew", ForceUnlock: "force_unlock"},
	// RedLock runs a simple lock's scripts on every node of its quorum.
	"redlock": {Acquire: "simple_acquire", Release: "redlock_release", Renew: "simple_renew", ForceUnlock: "force_unlock"},
}

// Source returns the Lua source of the named script (without ".lua"). A
// line "-- #include NAME" is replaced by the file NAME.luainc, code that
// several scripts share (Redis runs each script on its own, so shared code
// is part of each script's source and SHA1).
func Source(name string) (string, error) {
	b, err := files.ReadFile(name + ".lua")
	if err != nil {
		return "", fmt.Errorf("templates: no script %q", name)
	}
	lines := strings.SplitAfter(string(b), "\n")
	for i, line := range lines {
		inc, ok := strings.CutPrefix(strings.TrimSpace(line), "-- #include ")
		if !ok {
			continue
		}
		lib, err := files.ReadFile(inc + ".luainc")
		if err != nil {
			return "", fmt.Errorf("templates: script %q includes %q, which does not exist", name, inc)
		}
		lines[i] = string(lib)
	}
	return strings.Join(lines, ""), nil
}

// Names returns the names of every script, sorted.
func Names() []string {
	entries, _ := fs.ReadDir(files, ".")
	var names []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".lua")
		if !ok {
			continue // an included file
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
