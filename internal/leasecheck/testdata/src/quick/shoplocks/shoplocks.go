// Package shoplocks stands for a generated package: it imports the
// runtime, and the code that uses it need not.
package shoplocks

import lockrt "github.com/lockgen/lockgen/runtime"

type Locks struct{}

func (l *Locks) Order(orderID int64) *lockrt.Lock { return &lockrt.Lock{} }

type Semaphores struct{}

func (s *Semaphores) Export(tenant string) *lockrt.Semaphore { return &lockrt.Semaphore{} }
