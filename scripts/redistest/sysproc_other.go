//go:build !linux

package redistest

import "syscall"

// sysProcAttr returns nil: outside Linux there is no Pdeathsig, and a child
// outlives a test binary that dies without running its cleanups.
func sysProcAttr() *syscall.SysProcAttr { return nil }
