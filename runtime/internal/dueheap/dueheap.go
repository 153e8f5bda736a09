// Package dueheap is a container/heap of entries ordered by due time, each
// of which knows its index so that it can be fixed or removed in place:
// the watchdog's holds by next renewal and the delay scheduler's queues
// by next due item.
package dueheap

import "time"

// Heap is a container/heap of entries by due time.
type Heap[T Entry] []T

// Entry is an element of a Heap.
type Entry interface {
	Due() time.Time
	SetIndex(i int) // -1 once it has left the heap
}

func (h Heap[T]) Len() int           { return len(h) }
func (h Heap[T]) Less(i, j int) bool { return h[i].Due().Before(h[j].Due()) }
func (h Heap[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].SetIndex(i)
	h[j].SetIndex(j)
}

func (h *Heap[T]) Push(x any) {
	e := x.(T)
	e.SetIndex(len(*h))
	*h = append(*h, e)
}

func (h *Heap[T]) Pop() any {
	old := *h
	e := old[len(old)-1]
	var zero T
	old[len(old)-1] = zero
	*h = old[:len(old)-1]
	e.SetIndex(-1)
	return e
}
