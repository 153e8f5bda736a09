package rdb

import (
	"sync/atomic"
	"unsafe"
)

// Arguments that tell what go-redis did with a command. go-redis writes
// an argument to a connection once per attempt (MarshalBinary): a
// command whose reply was lost is sent again, and so is one redirected
// or answered NOSCRIPT. A script cannot tell its second run from its
// first; these arguments let the caller (Counted) or the script (Marked)
// tell (see "Exactly one effect" in docs/design.md).

// SendCounter is an argument whose sends go-redis counts, so a count
// above one says the command may have run more than once. A release that
// finds its hold gone after such a resend reports it released: the hold
// was there when the first send left (else the first run answered "not
// held" and only its reply was lost, a fault on top of a fault that this
// cannot tell apart), and the only run that could remove it is this
// call's own.
type SendCounter interface {
	Sends() int32
	ResetSends()
}

// Resent reports whether arg (a SendCounter, or any other argument) was
// sent more than once.
func Resent(arg any) bool {
	s, ok := arg.(SendCounter)
	return ok && s.Sends() > 1
}

// ResetSends forgets the sends of the counted arguments among args: a
// command answered NOSCRIPT ran nothing, and is sent again as EVAL.
func ResetSends(args []any) {
	for _, a := range args {
		if s, ok := a.(SendCounter); ok {
			s.ResetSends()
		}
	}
}

// HandedOn is called with a release's counted argument once its fast
// call (ReleaseFast) answered HandOnDue, before the whole release is sent
// with it: a call sent once changed nothing, and its send is forgotten;
// one sent more than once keeps its sends, for its first run may have
// released the hold and a later run found the object contended since,
// and then the whole release's "not held" is this call's own effect.
func HandedOn(arg any) {
	if s, ok := arg.(SendCounter); ok && s.Sends() <= 1 {
		s.ResetSends()
	}
}

// Counted is a string argument that counts its sends.
type Counted struct {
	s string
	n atomic.Int32
}

// NewCounted returns s as a Counted argument.
func NewCounted(s string) *Counted { return &Counted{s: s} }

// MarshalBinary returns the string's bytes, without a copy (go-redis
// copies them into its write buffer), and counts the send.
func (a *Counted) MarshalBinary() ([]byte, error) {
	a.n.Add(1)
	return unsafe.Slice(unsafe.StringData(a.s), len(a.s)), nil
}

// Sends returns how many times the argument was written.
func (a *Counted) Sends() int32 { return a.n.Load() }

// ResetSends forgets the sends so far.
func (a *Counted) ResetSends() { a.n.Store(0) }

// String is the argument's string, as go-redis prints the command.
func (a *Counted) String() string { return a.s }

// Marked is a string argument that tells a resend: go-redis writes it
// as it is the first time, and with '!' appended every later time (a
// resend after a lost reply, a redirect, the EVAL after NOSCRIPT). A
// script that keeps a record of its operation only reads the record when
// the mark says it may have run already, so the first run pays for
// writing the record alone.
type Marked struct {
	S    string
	sent atomic.Bool
}

// MarshalBinary returns the string, then the string and '!'.
func (a *Marked) MarshalBinary() ([]byte, error) {
	if a.sent.Swap(true) {
		return []byte(a.S + "!"), nil
	}
	return unsafe.Slice(unsafe.StringData(a.S), len(a.S)), nil
}

// String is the argument's string, as go-redis prints the command.
func (a *Marked) String() string { return a.S }
