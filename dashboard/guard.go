package dashboard

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
)

// The guard is what stands between the network and the handler's routes,
// in this order:
//
//  1. The Host header must name an allowed host (allowedHost): an IP
//     literal, localhost or a name under .localhost, or one of
//     Options.AllowedHosts. A page on another site that rebinds its own
//     name to 127.0.0.1 (DNS rebinding) sends its own name as Host and is
//     refused with 403 before anything is read or done.
//  2. A state-changing request (POST) from another origin is refused with
//     403 (net/http's CrossOriginProtection: Sec-Fetch-Site, else Origin
//     against Host), whatever its content type.
//  3. With Options.Token set, every /api/ and /metrics request needs
//     "Authorization: Bearer <token>", else 401. The page itself and its
//     static files need none: they hold no state.
//
// An action is then refused with 403 on a read-only dashboard, and with
// 415 unless its body is JSON.

// guard wraps next with the checks above.
func guard(next http.Handler, opts Options) http.Handler {
	g := &guarded{next: next}
	for _, h := range opts.AllowedHosts {
		h = normHost(h)
		switch {
		case h == "*":
			g.anyHost = true
		case strings.HasPrefix(h, "."):
			g.suffixes = append(g.suffixes, h)
		case h != "":
			g.hosts = append(g.hosts, h)
		}
	}
	if opts.Token != "" {
		sum := sha256.Sum256([]byte(opts.Token))
		g.token = sum[:]
	}
	g.cop = http.NewCrossOriginProtection()
	return g
}

type guarded struct {
	next     http.Handler
	cop      *http.CrossOriginProtection
	anyHost  bool
	hosts    []string // exact names, lower case
	suffixes []string // ".example.com": any name under it
	token    []byte   // sha256 of Options.Token; nil: none needed
}

func (g *guarded) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	if !g.allowedHost(r.Host) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte("lockgen dashboard: host " + quoteHost(r.Host) + " is not allowed (serve -allow-host, or dashboard.Options.AllowedHosts)\n"))
		return
	}
	if err := g.cop.Check(r); err != nil {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "cross-origin request refused"})
		return
	}
	if g.token != nil && needsToken(r.URL.Path) && !g.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="lockgen"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "this dashboard needs its token"})
		return
	}
	g.next.ServeHTTP(w, r)
}

// needsToken tells the routes that read or change state from the page and
// its static files.
func needsToken(path string) bool {
	return strings.HasPrefix(path, "/api/") || path == "/metrics"
}

// authorized tells whether r carries the token, compared in constant time.
func (g *guarded) authorized(r *http.Request) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(sum[:], g.token) == 1
}

// allowedHost tells whether a Host header names this dashboard: an IP
// literal (a page cannot make its origin an IP by DNS), localhost or a
// name under .localhost (which resolve to loopback), or an allowed name.
func (g *guarded) allowedHost(hostport string) bool {
	if g.anyHost {
		return true
	}
	h := normHost(hostport)
	if h == "" {
		return false
	}
	if net.ParseIP(h) != nil || h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	for _, a := range g.hosts {
		if h == a {
			return true
		}
	}
	for _, s := range g.suffixes {
		if strings.HasSuffix(h, s) {
			return true
		}
	}
	return false
}

// normHost returns the host of a Host header or an allowed host: without
// its port and the brackets of an IPv6 literal, without a trailing dot,
// in lower case.
func normHost(s string) string {
	s = strings.TrimSpace(s)
	if h, _, err := net.SplitHostPort(s); err == nil {
		s = h
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	return strings.ToLower(strings.TrimSuffix(s, "."))
}

func quoteHost(h string) string {
	if len(h) > 100 {
		h = h[:100]
	}
	return `"` + strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, h) + `"`
}

// IsLoopback tells whether addr (host:port or a host) is a loopback
// address or name: serve's test for an address other hosts cannot reach.
// The unspecified address (":8080", "0.0.0.0") is not loopback.
func IsLoopback(addr string) bool {
	h := normHost(addr)
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
