package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/lockgen/lockgen/dashboard"
	"github.com/lockgen/lockgen/inspect"
)

// Tests set these: serveReady receives the address serve listens on, and
// serve stops when serveContext's context ends (as on an interrupt).
var (
	serveReady   func(addr string)
	serveContext = context.Background
)

func (c *cli) serve(args []string) int {
	fs, usage := c.flags("serve")
	specPath := specFlag(fs)
	url := redisFlag(fs)
	addr := fs.String("addr", "127.0.0.1:8080", "listen on this `address`; the default is loopback only")
	readOnly := fs.Bool("read-only", false, "refuse force-unlock, redrive, purge and set-permits")
	refresh := fs.Duration("refresh", 2*time.Second, "how often the page reloads the state")
	maxScan := fs.Int("max-scan", 0, "keys SCAN may visit per node for one page (default 100000)")
	if code, ok := c.parseCommand(fs, args, usage); !ok {
		return code
	}
	in, rdb, ok := c.connect(*specPath, *url, inspect.Options{MaxScan: *maxScan})
	if !ok {
		return exitFail
	}
	defer rdb.Close()
	defer in.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(c.stderr, "lockgen serve: %v\n", err)
		return exitFail
	}
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); !net.ParseIP(host).IsLoopback() && !*readOnly {
		fmt.Fprintf(c.stderr, "lockgen serve: warning: %s is reachable from other hosts and its actions need no login; consider -read-only\n", ln.Addr())
	}
	srv := &http.Server{
		Handler:           dashboard.New(in, dashboard.Options{ReadOnly: *readOnly, Refresh: *refresh}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	ctx, stop := signal.NotifyContext(serveContext(), os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	fmt.Fprintf(c.stdout, "lockgen dashboard on http://%s/ (metrics at /metrics)\n", ln.Addr())
	if serveReady != nil {
		serveReady(ln.Addr().String())
	}
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(c.stderr, "lockgen serve: %v\n", err)
		return exitFail
	}
	return exitOK
}
