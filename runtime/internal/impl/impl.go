// Package impl holds what generated code gives the runtime: the static
// definitions of the objects of a spec, their scripts, and the hooks
// through which package lockimpl reaches the runtime's constructors
// without the runtime exporting them. Generated code names these types
// through lockimpl's aliases; the runtime uses them directly.
package impl

import (
	"context"
	"time"

	"github.com/lockgen/lockgen/internal/keys"
)

// Script is one of the runtime's Lua scripts with its SHA1 (see Pin).
type Script struct {
	Name   string // file name in lockgen's templates/, without ".lua"
	Source string
	SHA1   string // hex SHA1 of Source
	// Err, when not nil, is returned by every call that would run the
	// script: the generated code that pinned it was made for another
	// runtime's scripts (ErrScriptMismatch).
	Err error
}

// RegistryTTL, LiveRegistryTTL and HandoffLease are the waiter
// registry's timings (the runtime's document them); the scripts'
// registry_ttl is LiveRegistryTTL.
const (
	RegistryTTL     = time.Second
	LiveRegistryTTL = 30 * time.Second
	HandoffLease    = time.Second
)

// KeyDef is an object's key pattern, as emitted by lockgen.
type KeyDef struct {
	Namespace string
	Object    string
	// Literals has one more element than the object has params.
	Literals []string
}

// Key returns the key of the instance with the given param values, already
// formatted as strings, in placeholder order.
func (k *KeyDef) Key(values ...string) string {
	return keys.Build(k.Namespace, k.Object, k.Literals, values...)
}

// The runtime's constructors (NewLock, NewSemaphore, ... in each kind's
// file here) are set by package runtime when it initializes (each kind's
// file there) and called by package lockimpl, which gives them their
// types: c is a *runtime.Client, q a *runtime.Quorum, the results the
// runtime's *Lock, *RWLock, *Semaphore, *Latch, *Limiter and *RedLock.
// A kind's definition, scripts, constructor hook and the Pinned method
// that hands out its scripts live in one file per kind.

// Preload loads scripts on c's primaries (runtime.Client's).
var Preload func(ctx context.Context, c any, scripts ...*Script) error
