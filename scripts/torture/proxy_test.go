package main

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/scripts/redistest"
)

// incr is a script with an effect to count: how many times Redis ran it.
const incr = "return redis.call('incr', KEYS[1])"

// TestProxyLosesReplyAfterRun checks the proxy's lost reply on a real
// redis-server: the script runs, its reply does not come back, and
// go-redis's retry runs it again; in a pipeline, the requests before the
// lost one run and those after it are not sent.
func TestProxyLosesReplyAfterRun(t *testing.T) {
	node, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	p, err := newProxy(node.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: node.Addr})
	defer admin.Close()

	// One-shot: the next request loses its reply; go-redis (MaxRetries 3
	// by default) sends it again.
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil { // the connection's handshake, before the loss
		t.Fatal(err)
	}
	p.LoseReply()
	n, err := rdb.Eval(ctx, incr, []string{"one"}).Int()
	if err != nil || n != 2 {
		t.Fatalf("Eval after a lost reply = %d, %v; want 2 (the first run's effect, then the retry's)", n, err)
	}

	// Every EVAL loses its reply; no retries: the pipeline fails, the SET
	// before the EVAL ran, the EVAL ran once, the SET after it never reached Redis.
	p.SetLoseRate(1)
	once := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	defer once.Close()
	if err := once.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	pipe := once.Pipeline()
	pipe.Set(ctx, "before", 1, 0)
	pipe.Eval(ctx, incr, []string{"piped"})
	pipe.Set(ctx, "after", 1, 0)
	if _, err := pipe.Exec(ctx); err == nil {
		t.Fatal("a pipeline whose EVAL lost its reply succeeded")
	}
	got, err := admin.MGet(ctx, "before", "piped", "after").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != "1" || got[1] != "1" || got[2] != nil {
		t.Fatalf("before, piped, after = %v; want 1, 1, nil", got)
	}
	// Other commands pass.
	if err := once.Set(ctx, "plain", 1, 0).Err(); err != nil {
		t.Fatalf("SET through a proxy that loses EVAL replies: %v", err)
	}
}
