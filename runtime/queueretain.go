package runtime

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Retention: a reliable queue whose spec has retention: { for: 1h, max:
// 1000 } keeps its acknowledged items, newest first, to inspect what ran
// (templates/queue_ack.lua's retention branch). Each Ack then costs five
// Redis commands more in the same script call (TIME, HGET of the body,
// LPUSH, LTRIM to max, PEXPIRE); without retention an Ack costs what it
// did. Memory is bounded by max items; the list expires a window after
// the last Ack, and items older than the window are not returned.

// CompletedItem is an acknowledged item a queue with retention kept.
type CompletedItem[T any] struct {
	ID      string
	Done    time.Time // when it was acknowledged, on the Redis server's clock
	Attempt int       // the delivery that was acknowledged: 1 for the first
	Value   T         // the decoded item; the zero value when Raw does not decode
	Raw     []byte    // the item as stored
	// DecodeErr says why Raw does not decode, or nil.
	DecodeErr error
}

// doneKey returns the key of the queue's acknowledged items.
func (q *queue) doneKey() string { return q.key + ":done" }

// Completed returns up to n of the items acknowledged within the spec's
// retention window, newest first (at most the spec's retention max are
// kept), in one round trip. It returns ErrInvalidArgument for n < 1 or a
// queue whose spec has no retention, ErrClosed, or a Redis error.
func (q *ReliableQueue[T]) Completed(ctx context.Context, n int) ([]CompletedItem[T], error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: %d completed items", ErrInvalidArgument, n)
	}
	if q.q.def.Retention <= 0 {
		return nil, fmt.Errorf("%w: queue %s keeps no completed items (its spec has no retention)", ErrInvalidArgument, q.q.def.Name)
	}
	if err := q.q.c.checkOpen(); err != nil {
		return nil, err
	}
	type read struct {
		now     time.Time
		entries []string
	}
	r, err := readValue(ctx, func() (read, error) {
		pipe := q.q.c.rdb.Pipeline()
		now := pipe.Time(ctx)
		entries := pipe.LRange(ctx, q.q.doneKey(), 0, int64(n)-1)
		_, err := pipe.Exec(ctx)
		if err != nil && err != redis.Nil {
			return read{}, err
		}
		return read{now.Val(), entries.Val()}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("lockgen: completed items of %s: %w", q.q.key, err)
	}
	since := r.now.Add(-q.q.def.Retention)
	out := make([]CompletedItem[T], 0, len(r.entries))
	for _, e := range r.entries {
		it, ok := parseDone[T](e)
		switch {
		case !ok:
			continue // not an entry this runtime reads
		case it.Done.Before(since):
			return out, nil // newest first: the rest are older still
		}
		it.Value, it.DecodeErr = decodeItem(q.codec, it.Raw)
		out = append(out, it)
	}
	return out, nil
}

// parseDone reads one entry of the done list: "<id>\n<done ms>\n<delivery>\n<body>".
func parseDone[T any](e string) (CompletedItem[T], bool) {
	f := bytes.SplitN([]byte(e), []byte{'\n'}, 4)
	if len(f) != 4 {
		return CompletedItem[T]{}, false
	}
	ms, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return CompletedItem[T]{}, false
	}
	attempt, _ := strconv.Atoi(string(f[2]))
	return CompletedItem[T]{ID: string(f[0]), Done: time.UnixMilli(ms), Attempt: attempt, Raw: f[3]}, true
}
