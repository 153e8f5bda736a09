package runtime

import "time"

// dueHeap is a container/heap of entries ordered by due time, each of
// which knows its index so that it can be fixed or removed in place: the
// watchdog's holds by next renewal (watchdog.go) and the delay scheduler's
// queues by next due item (delay.go).
type dueHeap[T dueEntry] []T

// dueEntry is an element of a dueHeap.
type dueEntry interface {
	due() time.Time
	setIndex(i int) // -1 once it has left the heap
}

func (h dueHeap[T]) Len() int           { return len(h) }
func (h dueHeap[T]) Less(i, j int) bool { return h[i].due().Before(h[j].due()) }
func (h dueHeap[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].setIndex(i)
	h[j].setIndex(j)
}

func (h *dueHeap[T]) Push(x any) {
	e := x.(T)
	e.setIndex(len(*h))
	*h = append(*h, e)
}

func (h *dueHeap[T]) Pop() any {
	old := *h
	e := old[len(old)-1]
	var zero T
	old[len(old)-1] = zero
	*h = old[:len(old)-1]
	e.setIndex(-1)
	return e
}
