package runtime

import (
	"context"

	"github.com/lockgen/lockgen/runtime/internal/impl"
)

// The runtime's tests (package runtime_test) build objects as generated
// code does, under the names the runtime had before they moved to
// lockimpl (runtime/lockimpl), so the tests read the same; TestLockimpl
// builds them through lockimpl itself.
type (
	Script           = impl.Script
	KeyDef           = impl.KeyDef
	LockKind         = impl.LockKind
	LockScripts      = impl.LockScripts
	LockDef          = impl.LockDef
	SyncDef          = impl.SyncDef
	SemaphoreScripts = impl.SemaphoreScripts
	SemaphoreDef     = impl.SemaphoreDef
	LatchScripts     = impl.LatchScripts
	LatchDef         = impl.LatchDef
	LimiterAlgorithm = impl.LimiterAlgorithm
	LimiterScope     = impl.LimiterScope
	LimiterScripts   = impl.LimiterScripts
	LimiterDef       = impl.LimiterDef
	QueueScripts     = impl.QueueScripts
	QueueDef         = impl.QueueDef
	RedLockDef       = impl.RedLockDef
)

const (
	Reentrant      = impl.Reentrant
	Simple         = impl.Simple
	Fair           = impl.Fair
	ReadWrite      = impl.ReadWrite
	Fenced         = impl.Fenced
	GCRA           = impl.GCRA
	TokenBucket    = impl.TokenBucket
	SlidingWindow  = impl.SlidingWindow
	ScopeOverall   = impl.ScopeOverall
	ScopePerClient = impl.ScopePerClient
)

func (c *Client) Lock(def *LockDef, key string) *Lock                { return c.newLock(def, key) }
func (c *Client) RWLock(def *LockDef, key string) *RWLock            { return c.newRWLock(def, key) }
func (c *Client) Semaphore(def *SemaphoreDef, key string) *Semaphore { return c.newSemaphore(def, key) }
func (c *Client) Latch(def *LatchDef, key string) *Latch             { return c.newLatch(def, key) }
func (c *Client) Limiter(def *LimiterDef, key string) *Limiter       { return c.newLimiter(def, key) }
func (q *Quorum) RedLock(def *RedLockDef, key string) *RedLock       { return q.newRedLock(def, key) }

// RedCounts counts what the RedLock waits of the quorums given it do.
type RedCounts = redCounts

// CountInto makes q's RedLock waits count into c.
func (q *Quorum) CountInto(c *RedCounts) { q.counts = c }
func (c *Client) Preload(ctx context.Context, scripts ...*Script) error {
	return c.preload(ctx, scripts...)
}

func NewQueue[T any](c *Client, def *QueueDef, codec Codec[T], key string) *Queue[T] {
	return makeQueue(c, def, codec, key)
}

func NewDelayedQueue[T any](c *Client, def *QueueDef, codec Codec[T], key string) *DelayedQueue[T] {
	return makeDelayedQueue(c, def, codec, key)
}

func NewReliableQueue[T any](c *Client, def *QueueDef, codec Codec[T], key string) *ReliableQueue[T] {
	return makeReliableQueue(c, def, codec, key)
}

func NewDelayedReliableQueue[T any](c *Client, def *QueueDef, codec Codec[T], key string) *DelayedReliableQueue[T] {
	return makeDelayedReliableQueue(c, def, codec, key)
}

// TimerBusy reports whether c's delay timer has a move due, pending or
// running (a served queue that is only lingering idle does not count).
func (c *Client) TimerBusy() bool { return c.sched.Busy() }

// TimerMoving reports whether c's delay timer has a move pending or
// running (one scheduled for later does not count).
func (c *Client) TimerMoving() bool { return c.sched.Moving() }
