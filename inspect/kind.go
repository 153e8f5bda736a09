package inspect

import (
	"context"
	"io"
	"math/big"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/spec"
)

// kind is everything inspect does differently for one kind of object:
// how to read its live state, add it up, say it in words (lockgen
// inspect's text and the dashboard's) and count it in metrics. Each kind
// has one file in this package (lock.go, semaphore.go, latch.go,
// limiter.go, queue.go) holding its kind and registering it for its
// section of spec.Kinds; the rest of the package reads every kind
// through this interface, so a new kind adds its file (and its state's
// field in Instance and its totals in Totals, state.go) and nothing else
// here, in the dashboard or in its script.
type kind interface {
	// names are the kinds inspect reports for the section's objects:
	// a lock's kind ("reentrant", ...), or one word ("semaphore").
	names() []string
	// name is the kind inspect reports for obj, one of names.
	name(obj spec.Obj) string
	// read adds the reads of one instance to pipe and returns what turns
	// their replies into inst's state; that may return a second round,
	// and the rounds may be nil (reader).
	read(ctx context.Context, in *Inspector, pipe redis.Pipeliner, f *found, inst *Instance) reader
	// total adds inst to t.
	total(t *Totals, inst *Instance)
	// summary says what an object's instances hold, for lockgen
	// inspect's summary ("" for nothing); the waiters follow it.
	summary(o *ObjectState) string
	// brief is summary as the dashboard's table of objects says it, from
	// the totals alone; the waiters follow it.
	brief(o *ObjectState) string
	// state says in one line what one instance holds (State).
	state(inst *Instance) string
	// details writes one instance's tables for WriteInstance (holders,
	// waiters, items), each after an empty line.
	details(w io.Writer, inst *Instance)
	// gauges are an object's metrics, beyond its instance count.
	gauges(o *ObjectState) []Gauge
	// view is one instance as the dashboard shows it.
	view(inst *Instance) View
	// waitsFor returns an instance's edges in the wait-for graph: every
	// waiter waits for every holder (NewGraph). A kind whose waiter
	// waits for any one holder (a semaphore's) returns none: a cycle
	// through it need not be a deadlock.
	waitsFor(inst *Instance) ([]Holder, []Waiter)
}

// reader turns the replies of an instance's reads into its state, given
// the server's time; it may return a second round of reads (and that,
// what turns their replies into state), or nil.
type reader func(nowMs int64) func(redis.Pipeliner) func()

// done is a reader with no second round.
func done(fn func(nowMs int64)) reader {
	return func(nowMs int64) func(redis.Pipeliner) func() { fn(nowMs); return nil }
}

// laterReader is a kind whose instances need reads of their own after the
// pipelined ones (a limiter runs its script per allowance).
type laterReader interface {
	readLater(ctx context.Context, in *Inspector, f *found, inst *Instance)
}

// suffixReader is a kind whose instance, read alone (Inspector.Instance),
// needs the suffixes of its keys found by a scan first (a per-client
// limiter's allowances are keys of their own).
type suffixReader interface {
	needsSuffixes(obj spec.Obj) bool
}

var (
	// kindOfSection holds each section's kind, by section ("locks").
	kindOfSection = map[string]kind{}
	// kindNamed holds the kinds by the names inspect reports.
	kindNamed = map[string]kind{}
)

// register makes k the kind of section's objects; each kind's file calls
// it from an init function. It panics on a section or name registered
// twice.
func register(section string, k kind) {
	if kindOfSection[section] != nil {
		panic("inspect: two kinds for section " + section)
	}
	kindOfSection[section] = k
	for _, n := range k.names() {
		if kindNamed[n] != nil {
			panic("inspect: two kinds named " + n)
		}
		kindNamed[n] = k
	}
}

// kindOf returns the kind inspect reports as name; an unknown name (from
// JSON of another lockgen) gets one that reads and shows nothing.
func kindOf(name string) kind {
	if k := kindNamed[name]; k != nil {
		return k
	}
	return noKind{}
}

// noKind is the kind of an Instance or ObjectState whose kind this
// inspect does not know.
type noKind struct{}

func (noKind) names() []string                         { return nil }
func (noKind) name(spec.Obj) string                    { return "" }
func (noKind) total(*Totals, *Instance)                {}
func (noKind) summary(*ObjectState) string             { return "" }
func (noKind) brief(*ObjectState) string               { return "" }
func (noKind) state(*Instance) string                  { return "" }
func (noKind) details(io.Writer, *Instance)            {}
func (noKind) gauges(*ObjectState) []Gauge             { return nil }
func (noKind) view(*Instance) View                     { return View{} }
func (noKind) waitsFor(*Instance) ([]Holder, []Waiter) { return nil, nil }
func (noKind) read(context.Context, *Inspector, redis.Pipeliner, *found, *Instance) reader {
	return done(func(int64) {})
}

// Gauge is one metric of an object: its name and help (a Prometheus
// family), value, and labels beyond the object's name and kind, in
// pairs.
type Gauge struct {
	Name   string
	Help   string
	Value  float64
	Labels []string
}

// Gauges returns an object's metrics beyond its instance count, as the
// dashboard's /metrics serves them (the object's name and kind label
// each).
func Gauges(o *ObjectState) []Gauge { return kindOf(o.Kind).gauges(o) }

// Brief says in a few words what an object's instances hold, from its
// totals, as the dashboard's table of objects shows it.
func Brief(o *ObjectState) string {
	return withWaiters(kindOf(o.Kind).brief(o), o.Waiters)
}

// withWaiters appends the waiters, if any, to what an object holds.
func withWaiters(s string, waiters int) string {
	if waiters > 0 {
		if s != "" {
			s += ", "
		}
		s += strconv.Itoa(waiters) + " waiting"
	}
	return s
}

// View is one instance as the dashboard shows it: its state in a line,
// the lines of its details, its items and the actions an operator may
// take, each with the question the page asks first. The page renders
// any kind's View alike.
type View struct {
	// State is the instance's state in one line; Class, when set, is
	// the page's style of it ("held", "free").
	State string `json:"state"`
	Class string `json:"class,omitempty"`
	// Details are lines about holders and waiters.
	Details []string `json:"details,omitempty"`
	// Items are a queue's items, each with its id, state and actions.
	Items []ViewItem `json:"items,omitempty"`
	// Note follows the items ("first items only: ...").
	Note string `json:"note,omitempty"`
	// Actions are the actions on the whole instance.
	Actions []Offer `json:"actions,omitempty"`
}

// ViewItem is one item of an instance (a queue's) in a View.
type ViewItem struct {
	ID      string  `json:"id,omitempty"` // none for a plain queue's ready items
	State   string  `json:"state"`
	Text    string  `json:"text"`
	Actions []Offer `json:"actions,omitempty"` // offered only for an item with an id
}

// Offer is an action the dashboard offers: its name in the dashboard's
// API, its button's label, and the question confirming it; N, when set,
// is a number the operator confirms or changes (set-permits' capacity).
type Offer struct {
	Action   string `json:"action"`
	Label    string `json:"label"`
	Question string `json:"question"`
	N        *int   `json:"n,omitempty"`
}

// ViewOf returns an instance as the dashboard shows it.
func ViewOf(inst *Instance) View { return kindOf(inst.Kind).view(inst) }

// msText formats milliseconds as the dashboard's page always has: 850ms,
// 1.5s, 2m5s, 1.2h; "no expiry" when negative.
func msText(v int64) string {
	switch {
	case v < 0:
		return "no expiry"
	case v < 1000:
		return strconv.FormatInt(v, 10) + "ms"
	case v < 60000:
		return toFixed1(float64(v)/1000) + "s"
	case v < 3600000:
		return strconv.FormatInt(v/60000, 10) + "m" + strconv.FormatInt(v%60000/1000, 10) + "s"
	}
	return toFixed1(float64(v)/3600000) + "h"
}

// toFixed1 is JavaScript's x.toFixed(1) for x >= 0: the nearest tenth of
// x's exact value, ties up.
func toFixed1(x float64) string {
	r := new(big.Rat).SetFloat64(x)
	r.Mul(r, big.NewRat(10, 1))
	r.Add(r, big.NewRat(1, 2))
	n := new(big.Int).Quo(r.Num(), r.Denom()) // floor, for x >= 0
	s := n.String()
	if len(s) < 2 {
		s = "0" + s
	}
	return s[:len(s)-1] + "." + s[len(s)-1:]
}
