package runtime

import (
	"testing"
	"unsafe"
)

// TestLeaseSize: every Lock allocates its Lease, so its size is part of
// what an uncontended Lock+Unlock costs (the bytes a cycle allocates
// decide how often the collector runs, and its assists are charged to the
// allocating call: a temporary row of BenchmarkUncontendedInterleaved
// allocating 288 bytes more per cycle measured about 1% slower on
// 2026-11-26, scripts/bench/README.md, fourth session). A Lease fits the
// allocator's 288-byte class since the watchdog's entry of a young hold
// is made at promotion (it was 560 bytes, in the 576 class); it fails
// when a field pushes it into the next class.
func TestLeaseSize(t *testing.T) {
	if n := unsafe.Sizeof(Lease{}); n > 288 {
		t.Errorf("a Lease is %d bytes, want at most 288 (an allocation class of its own)", n)
	}
}
