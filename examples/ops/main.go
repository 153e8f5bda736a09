// Command ops is lockgen's operator demo: services hold locks, permits and
// queue items of examples/ops/shopops, and the demo shows what lockgen
// inspect sees of them. With -serve it keeps them and serves the
// dashboard (lockgen serve) until interrupted.
//
// It runs against the Redis at $REDIS_ADDR, or, when that is not set,
// against an embedded in-process Redis (miniredis). Run it with `make
// demo`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/dashboard"
	"github.com/lockgen/lockgen/examples/ops/demo"
	"github.com/lockgen/lockgen/inspect"
)

// specPath is the demo's spec, relative to the repository root (make demo
// runs there) or to this directory (go test).
func specPath() string {
	for _, p := range []string{"examples/ops/shopops/lockgen.yaml", "shopops/lockgen.yaml"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "examples/ops/shopops/lockgen.yaml"
}

func main() {
	serve := flag.String("serve", "", "after the demo, serve the dashboard on this `address` (e.g. 127.0.0.1:8080) until interrupted")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *serve); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, out *os.File, serve string) error {
	if serve != "" && !dashboard.IsLoopback(serve) {
		// The demo's dashboard has its actions and no token: loopback
		// only (lockgen serve takes a token for another address).
		return fmt.Errorf("-serve %s: the demo serves on a loopback address only (127.0.0.1:8080)", serve)
	}
	addr, stop, err := redisAddr()
	if err != nil {
		return err
	}
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	closeClients, err := demo.Populate(ctx, rdb)
	if err != nil {
		return err
	}
	defer closeClients()

	in, err := inspect.Load(rdb, specPath(), inspect.Options{})
	if err != nil {
		return err
	}
	defer in.Close()
	fmt.Fprintf(out, "\n== lockgen inspect -spec %s -redis redis://%s\n", specPath(), addr)
	snap, err := in.Snapshot(ctx)
	if err != nil {
		return err
	}
	inspect.WriteSummary(out, snap, nil)
	fmt.Fprintf(out, "\n== lockgen inspect ... Email acme\n")
	inst, err := in.Instance(ctx, "Email", "acme")
	if err != nil {
		return err
	}
	inspect.WriteInstance(out, inst)
	fmt.Fprintf(out, "\n== lockgen inspect ... Rates\n")
	l, err := in.Instances(ctx, "Rates")
	if err != nil {
		return err
	}
	inspect.WriteListing(out, l)

	if serve == "" {
		fmt.Fprintf(out, "\nTo look at it in a browser: go run ./examples/ops -serve 127.0.0.1:8080, then open http://127.0.0.1:8080/\n"+
			"(against your own Redis: lockgen serve -spec lockgen.yaml -redis redis://host:6379)\n")
		return nil
	}
	srv := &http.Server{Addr: serve, Handler: dashboard.New(in, dashboard.Options{}), ReadHeaderTimeout: 10 * time.Second}
	ctx, cancel := signal.NotifyContext(ctx, os.Interrupt)
	defer cancel()
	go func() { <-ctx.Done(); srv.Close() }()
	fmt.Fprintf(out, "\nThe dashboard is on http://%s/ (metrics at /metrics); Ctrl-C stops it.\n", serve)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// redisAddr returns $REDIS_ADDR, or starts an embedded Redis whose clock
// follows real time.
func redisAddr() (string, func(), error) {
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		return addr, func() {}, nil
	}
	m, err := miniredis.Run()
	if err != nil {
		return "", nil, err
	}
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				m.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	return m.Addr(), func() { close(done); m.Close() }, nil
}
