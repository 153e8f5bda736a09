package main

import "syscall"

// childAttr makes the kernel kill a worker when the harness dies, even
// without its cleanups (as scripts/redistest does for redis-server).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
