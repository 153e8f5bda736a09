//go:build !linux

package main

import "time"

// mono returns the wall clock in nanoseconds: outside Linux there is no
// clock shared by all processes that Go can read without cgo, and the
// harness's orderings hold only as long as nobody steps the clock.
func mono() int64 { return time.Now().UnixNano() }
