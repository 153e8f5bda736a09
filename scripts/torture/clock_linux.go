package main

import (
	"syscall"
	"unsafe"
)

// mono returns CLOCK_MONOTONIC in nanoseconds. On Linux this clock is one
// clock for every process of the machine (unlike Go's monotonic reading,
// which is relative to the process's start), so stamps taken by different
// worker processes and by the harness compare directly, and no wall-clock
// step can reorder them.
func mono() int64 {
	var ts syscall.Timespec
	const clockMonotonic = 1
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic("torture: clock_gettime(CLOCK_MONOTONIC): " + errno.Error())
	}
	return ts.Nano()
}
