package hub

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestWaiterList: a subscription's waiters keep their arrival order
// through joins and leaves (wakeOne and broadcast go by it), a message
// naming an owner goes to that owner's longest-waiting waiter (an owner
// carried in a context may wait twice on one channel), and a waiter that
// left is found by nothing.
func TestWaiterList(t *testing.T) {
	var l waiterList
	ws := map[string]*Waiter{}
	join := func(name, owner string) {
		w := &Waiter{owner: owner, msg: name}
		ws[name] = w
		l.push(w)
	}
	order := func() []string {
		var got []string
		for w := range l.each {
			got = append(got, w.msg)
		}
		return got
	}
	join("a", "c:1")
	join("b", "c:2")
	join("watch", "")
	join("c", "c:1") // the same owner waits on a second object
	join("d", "c:3")
	if got, want := order(), []string{"a", "b", "watch", "c", "d"}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	if w := l.ofOwner("c:1"); w != ws["a"] {
		t.Fatalf("c:1's waiter: %v, want the first to join", w)
	}
	l.remove(ws["a"])
	l.remove(ws["a"]) // a second leave changes nothing
	if w := l.ofOwner("c:1"); w != ws["c"] {
		t.Fatalf("c:1's waiter after the first left: %v, want its second", w)
	}
	l.remove(ws["d"]) // the tail
	l.remove(ws["b"])
	if got, want := order(), []string{"watch", "c"}; !slices.Equal(got, want) {
		t.Fatalf("order after leaves %v, want %v", got, want)
	}
	if l.ofOwner("c:2") != nil || l.ofOwner("c:3") != nil || l.ofOwner("") != nil {
		t.Fatal("a waiter that left (or one without an owner) is found by owner")
	}
	l.remove(ws["watch"])
	l.remove(ws["c"])
	if got := order(); len(got) != 0 || l.head != nil || l.tail != nil || len(l.byOwner) != 0 || l.twins != 0 {
		t.Fatalf("list not empty after every leave: %v, %d owners, %d twins", got, len(l.byOwner), l.twins)
	}
	// A twin that leaves before the first of its owner.
	join("f", "c:5")
	join("g", "c:5")
	l.remove(ws["g"])
	if l.ofOwner("c:5") != ws["f"] || l.twins != 0 {
		t.Fatalf("after a twin left: c:5's waiter %v, %d twins", l.ofOwner("c:5"), l.twins)
	}
	l.remove(ws["f"])
	join("e", "c:4")
	if got := order(); !slices.Equal(got, []string{"e"}) || l.ofOwner("c:4") != ws["e"] {
		t.Fatalf("a join after the list emptied: %v", got)
	}
}

// BenchmarkSharedChannel: one message naming a waiter, delivered on a
// channel n waiters share, and that waiter leaving: the work per wait of
// a client whose n waits in one namespace share a wake-up channel. It
// costs the same at every n (it scanned the n waiters twice before the
// owner index).
func BenchmarkSharedChannel(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) {
			h := &Hub{}
			s := &Subscription{}
			for i := range n {
				h.JoinAs(s, fmt.Sprintf("c:%d", i), make(chan struct{}, 1))
			}
			i := 0
			for b.Loop() {
				owner := fmt.Sprintf("c:%d", n+i)
				w := h.JoinAs(s, owner, make(chan struct{}, 1))
				h.mu.Lock()
				h.deliver(s, owner)
				h.mu.Unlock()
				h.Leave(s, w, true)
				i++
			}
		})
	}
}

// TestBroadcastSince: a message that wakes every waiter ("all") is told
// apart by time from a waiter's attempt: BroadcastSince reports it to a
// waiter whose attempt was sent before it (and which joined only after it,
// so that nothing woke it), and not to one whose attempt came after; a
// message naming an owner or none is not a broadcast.
func TestBroadcastSince(t *testing.T) {
	h := &Hub{}
	s := &Subscription{channel: "c"}
	before := time.Now()
	h.mu.Lock()
	h.deliver(s, "c:1 t5")
	h.deliver(s, "retry")
	h.mu.Unlock()
	if h.BroadcastSince(s, before) {
		t.Fatal("a message naming an owner, or none, counted as a broadcast")
	}
	h.mu.Lock()
	h.deliver(s, wakeAll)
	h.mu.Unlock()
	after := time.Now()
	if !h.BroadcastSince(s, before) {
		t.Fatal(`"all" after an attempt: not reported`)
	}
	if h.BroadcastSince(s, after) {
		t.Fatal(`"all" before an attempt: reported`)
	}
}
