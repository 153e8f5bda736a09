package runtime

import (
	"context"

	"github.com/lockgen/lockgen/runtime/internal/impl"
)

// The constructors generated code calls, through package lockimpl (see
// runtime/internal/impl): they take the definitions lockgen emits, so
// they are not part of this package's API.
func init() {
	impl.NewLock = func(c any, def *impl.LockDef, key string) any { return c.(*Client).newLock(def, key) }
	impl.NewRWLock = func(c any, def *impl.LockDef, key string) any { return c.(*Client).newRWLock(def, key) }
	impl.NewSemaphore = func(c any, def *impl.SemaphoreDef, key string) any {
		return c.(*Client).newSemaphore(def, key)
	}
	impl.NewLatch = func(c any, def *impl.LatchDef, key string) any { return c.(*Client).newLatch(def, key) }
	impl.NewLimiter = func(c any, def *impl.LimiterDef, key string) any { return c.(*Client).newLimiter(def, key) }
	impl.NewRedLock = func(q any, def *impl.RedLockDef, key string) any { return q.(*Quorum).newRedLock(def, key) }
	impl.SetUpQueue = func(q, c any, def *impl.QueueDef, codec any, key string) {
		q.(queueSetUp).setUp(c.(*Client), def, codec, key)
	}
	impl.Preload = func(ctx context.Context, c any, scripts ...*impl.Script) error {
		return c.(*Client).preload(ctx, scripts...)
	}
}

// queueSetUp is implemented by *Queue[T] and *ReliableQueue[T] for every T.
type queueSetUp interface {
	setUp(c *Client, def *impl.QueueDef, codec any, key string)
}

func (q *Queue[T]) setUp(c *Client, def *impl.QueueDef, codec any, key string) {
	*q = *makeQueue(c, def, codec.(Codec[T]), key)
}

func (q *ReliableQueue[T]) setUp(c *Client, def *impl.QueueDef, codec any, key string) {
	*q = *makeReliableQueue(c, def, codec.(Codec[T]), key)
}
