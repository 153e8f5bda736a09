// Package templates holds lockgen's Lua scripts, one file per script. The
// runtime embeds them (runtime/internal/impl, which also says which
// scripts each object kind runs: a kind's *…Scripts).
//
// Each script's contract (its KEYS, ARGV and reply) is written once, in
// the header at the top of its file, in the grammar README.md describes;
// ContractOf parses it. The tests hold the script bodies to their headers
// (TestScriptHeaders) and the runtime's calls and reply decoders to them
// (runtime's TestScriptContracts and TestDecodersCiteHeaders).
//
// Every lock kind follows one calling convention, so the runtime drives
// them the same way: acquire, release, renew and force_unlock take the
// lock's keys (the lock, then the waiter registry's queue and waiters,
// then the keys of the kind: fenced its fence counter; readwrite has its
// hold deadlines second, KEYS lock, holds, queue, waiters), and readwrite
// scripts take the side ("r" or "w") as their last ARGV. What only the
// contended path reads is optional, left out where it cannot be needed: a
// first attempt's registered flag, and the registry's keys and the
// hand-off's arguments of the reentrant and simple release of a hold the
// fast path took (which replies -3, changing nothing, when a waiter is
// due the lock: the runtime calls it again whole). The waiter
// registry is described in runtime's package doc, "Waiter registry"; its
// code is registry.luainc, included by the scripts that use it (and the
// read-write state's is rw.luainc). Every kind's waiter that gives up
// leaves through release (its leaving ARGV '1'), no script of its own. A
// RedLock node keeps a registry of its own: redlock_acquire registers a
// waiter it refuses, and redlock_release wakes the longest-waiting one
// (it cannot hand over a lock held on several nodes).
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
