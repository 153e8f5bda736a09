package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
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
	tokenFile := fs.String("token-file", "", "require the token in this `file` (else $"+tokenEnv+") as a bearer token for the API and /metrics")
	var allowHosts []string
	fs.Func("allow-host", "a host `name` the page may be opened as, besides IPs and localhost (repeat, or comma-separated; .example.com: any name under it)", func(s string) error {
		for _, h := range strings.Split(s, ",") {
			if h = strings.TrimSpace(h); h != "" {
				allowHosts = append(allowHosts, h)
			}
		}
		return nil
	})
	if code, ok := c.parseCommand(fs, args, usage); !ok {
		return code
	}
	token, err := serveToken(*tokenFile)
	if err != nil {
		fmt.Fprintf(c.stderr, "lockgen serve: %v\n", err)
		return exitUsage
	}
	// Refuse an address other hosts reach, with actions and no token:
	// an IP (or none: every interface) here, before dialling Redis; a
	// name once it is resolved, below.
	h := hostOf(*addr)
	isIP := net.ParseIP(strings.Trim(h, "[]")) != nil
	if !*readOnly && token == "" && (h == "" || isIP) && !dashboard.IsLoopback(h) {
		fmt.Fprintf(c.stderr, "lockgen serve: %s is reachable from other hosts: give a token (-token-file FILE or $%s) or -read-only\n", *addr, tokenEnv)
		return exitUsage
	}
	if h != "" && !isIP {
		allowHosts = append(allowHosts, h) // the name it was told to listen as
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
	if !dashboard.IsLoopback(ln.Addr().String()) && !*readOnly && token == "" {
		// A name that resolved to another host's address.
		ln.Close()
		fmt.Fprintf(c.stderr, "lockgen serve: %s is reachable from other hosts: give a token (-token-file FILE or $%s) or -read-only\n", ln.Addr(), tokenEnv)
		return exitUsage
	}
	srv := &http.Server{
		Handler: dashboard.New(in, dashboard.Options{
			ReadOnly: *readOnly, Refresh: *refresh, Token: token, AllowedHosts: allowHosts,
		}),
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
	go sampleHistory(ctx, in)
	fmt.Fprintf(c.stdout, "lockgen dashboard on http://%s/ (metrics at /metrics)\n", ln.Addr())
	if token != "" {
		fmt.Fprintf(c.stdout, "the API and /metrics need the token (Authorization: Bearer); the page asks for it once, or open http://%s/#token=TOKEN\n", ln.Addr())
	}
	if serveReady != nil {
		serveReady(ln.Addr().String())
	}
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(c.stderr, "lockgen serve: %v\n", err)
		return exitFail
	}
	return exitOK
}

// tokenEnv is the environment variable serve reads its token from when
// -token-file is not given.
const tokenEnv = "LOCKGEN_DASHBOARD_TOKEN"

// serveToken reads the dashboard's token from file, else from $tokenEnv
// ("" when neither is given). A token is never a flag's value, which
// other users of the host could read in the process list.
func serveToken(file string) (string, error) {
	tok := os.Getenv(tokenEnv)
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("reading the token: %w", err)
		}
		tok = string(b)
	}
	tok = strings.TrimSpace(tok)
	if file != "" && tok == "" {
		return "", fmt.Errorf("the token file %s is empty", file)
	}
	if tok != "" && len(tok) < 16 {
		return "", fmt.Errorf("the token has %d characters: give at least 16 (for example: openssl rand -hex 16)", len(tok))
	}
	return tok, nil
}

// hostOf returns the host of a listen address ("" for ":8080").
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// sampleHistory samples the objects' state into the dashboard's history
// now and every minute until ctx ends, so that its charts of state have
// no gaps while no page is open (a failure leaves one).
func sampleHistory(ctx context.Context, in *inspect.Inspector) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_ = dashboard.Sample(sctx, in)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
