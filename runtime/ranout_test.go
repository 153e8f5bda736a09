package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// stallHook delays the scripts whose SHA1 it names by d before sending
// them: a process stalled between deciding to release and the release
// reaching Redis.
type stallHook struct {
	sha string
	d   time.Duration
}

func (h stallHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h stallHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); len(args) > 1 && cmd.Name() == "evalsha" && args[1] == h.sha {
			time.Sleep(h.d) // the stall
		}
		return next(ctx, cmd)
	}
}
func (h stallHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestReleaseAfterLeaseRanOut: an Unlock (a permit's Release) whose
// script reaches Redis only after the lease ran out (a stall between the
// call and its send) finds no hold, and reports the hold lost
// (ErrLockLost, ErrPermitLost), not never held.
func TestReleaseAfterLeaseRanOut(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		const lease = 300 * time.Millisecond
		c := newClient(t, b)
		d := def(t, lockrt.Reentrant, lease, false, 0)
		sd := semDef(t, 2, lease, false, 0)
		c.Redis().AddHook(stallHook{sha: d.Scripts.Release.SHA1, d: 2 * lease})
		c.Redis().AddHook(stallHook{sha: sd.Scripts.Release.SHA1, d: 2 * lease})
		le, err := c.Lock(d, key(t, "lock")).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := le.Unlock(ctx); !errors.Is(err, lockrt.ErrLockLost) {
			t.Errorf("Unlock that reached Redis after the lease: %v, want ErrLockLost", err)
		}
		p, err := c.Semaphore(sd, key(t, "sem")).Acquire(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Release(ctx); !errors.Is(err, lockrt.ErrPermitLost) {
			t.Errorf("Release that reached Redis after the lease: %v, want ErrPermitLost", err)
		}
	})
}
