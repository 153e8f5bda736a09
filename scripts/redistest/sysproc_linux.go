//go:build linux

package redistest

import "syscall"

// sysProcAttr makes the kernel kill redis-server when the test binary dies,
// even if it dies without running its cleanups.
//
// Pdeathsig is tied to the OS thread that started the child, not to the
// process. That is safe here: the Go runtime only ends a thread when a
// goroutine locked to it (runtime.LockOSThread) exits, and this package never
// locks its goroutines.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
