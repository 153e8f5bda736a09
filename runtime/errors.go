package runtime

import (
	"errors"

	"github.com/lockgen/lockgen/runtime/internal/impl"
)

// Sentinel errors. Every error the runtime returns for these conditions
// matches them with errors.Is; some wrap a second cause (for example the
// context's error when a wait was cut short).
var (
	// ErrNotObtained: the lock was held by another owner for the whole
	// wait. When the caller's context ended the wait, the error also
	// matches that context's error.
	ErrNotObtained = errors.New("lockgen: lock not obtained")

	// ErrNotHeld: an unlock by an owner that does not hold the lock, or a
	// lease unlocked twice.
	ErrNotHeld = errors.New("lockgen: lock not held by this owner")

	// ErrLockLost: the lock was lost while held: its key was deleted or
	// taken over, or it could not be renewed before its lease ran out.
	// It is the cause of a lost lease's context (context.Cause).
	ErrLockLost = impl.ErrLockLost

	// ErrNotReentrant: a simple lock was requested again by the owner
	// that already holds it; waiting would deadlock.
	ErrNotReentrant = errors.New("lockgen: lock is not reentrant and already held by this owner")

	// ErrClosed: the client was closed. It is the cause of the contexts of
	// the leases still held then, because nothing renews them any more.
	ErrClosed = impl.ErrClosed

	// ErrScriptMismatch: the generated code was made for other scripts
	// than this runtime's (it pins their SHA1s: regenerate it with the
	// lockgen version of your go.mod), or Redis computed another SHA1 for
	// a script than the runtime did. Every call of an object of such
	// generated code returns it, and so does its Preload.
	ErrScriptMismatch = impl.ErrScriptMismatch

	// ErrInvalidArgument: an argument out of range, such as a negative wait.
	ErrInvalidArgument = errors.New("lockgen: invalid argument")

	// ErrNotReleased: a release (Unlock, a permit's Release) could not
	// reach Redis within ReleaseTimeout. The hold is no longer renewed, so
	// it expires at the end of its lease; the error also wraps the Redis
	// error.
	ErrNotReleased = errors.New("lockgen: not released, so it expires at the end of its lease")
)
