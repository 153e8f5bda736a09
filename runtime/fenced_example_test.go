package runtime_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// fencedSet is the storage side of fencing, here a Redis hash: it applies
// a write only when the writer's token is at least the newest token the
// record has seen, atomically. A holder whose lock expired while it was
// paused (a GC pause, a slow network) and was taken by someone else still
// believes it holds the lock, but its token is older than the new
// holder's: its late write is refused. Writes with an equal token are the
// same hold writing again.
var fencedSet = redis.NewScript(`
local seen = tonumber(redis.call('hget', KEYS[1], 'token') or '0')
if tonumber(ARGV[1]) < seen then
  return 0
end
redis.call('hset', KEYS[1], 'token', ARGV[1], 'value', ARGV[2])
return 1`)

// errStale is returned by storage for a write with an outdated token.
var errStale = errors.New("stale fencing token: the lock was taken by someone else")

// store writes value under record on behalf of the holder of token.
func store(ctx context.Context, rdb redis.Scripter, record string, token int64, value string) error {
	ok, err := fencedSet.Run(ctx, rdb, []string{record}, token, value).Int()
	if err != nil {
		return err
	}
	if ok == 0 {
		return errStale
	}
	return nil
}

// Every hold of a fenced lock carries a token larger than every earlier
// hold's. Pass it with each write to the storage the lock protects, and
// have the storage refuse writes older than the newest it has seen.
func ExampleLease_Token() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	rt := lockrt.New(rdb)
	defer rt.Close()

	// In generated code: ledger := shoplocks.NewLocks(rt).Ledger("acct-42"),
	// for a lock of kind fenced.
	var ledger *lockrt.Lock

	lease, err := ledger.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Unlock(ctx)
	if err := store(lease.Context(), rdb, "ledger:acct-42", lease.Token(), "balance=100"); errors.Is(err, errStale) {
		fmt.Println("lost the lock before writing; nothing written")
	}
}
