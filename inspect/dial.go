package inspect

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Dial returns a Redis client for a URL:
//
//	redis://[user:password@]host:port[/db]             one node (rediss:// for TLS)
//	redis-sentinel://[user:password@]host:port[,host:port...]/master[/db]
//	                                                   Sentinel: the sentinels' addresses and the master's name
//	redis-cluster://[user:password@]host:port[,host:port...]
//	                                                   Cluster: any of its nodes' addresses
//
// For Sentinel, the password is the data nodes'; set
// ?sentinel_password=... for the sentinels' own.
func Dial(raw string) (redis.UniversalClient, error) {
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, fmt.Errorf("inspect: %q is not a Redis URL (redis://host:port, redis-sentinel://host:port/master, redis-cluster://host:port,...)", raw)
	}
	switch scheme {
	case "redis", "rediss", "unix":
		opt, err := redis.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("inspect: %w", err)
		}
		return redis.NewClient(opt), nil
	case "redis-sentinel", "redis-cluster":
	default:
		return nil, fmt.Errorf("inspect: unknown scheme %q (redis, rediss, redis-sentinel, redis-cluster)", scheme)
	}
	// url.Parse rejects a host list; parse the rest with a placeholder host.
	rest := raw[len(scheme)+3:]
	userinfo, hostsAndPath := "", rest
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		userinfo, hostsAndPath = rest[:at], rest[at+1:]
	}
	hosts, path, _ := strings.Cut(hostsAndPath, "/")
	path, query, _ := strings.Cut(path, "?")
	if i := strings.IndexByte(hosts, '?'); i >= 0 {
		hosts, query = hosts[:i], hosts[i+1:]
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("inspect: %q: %w", raw, err)
	}
	var addrs []string
	for _, h := range strings.Split(hosts, ",") {
		if h == "" {
			continue
		}
		if !strings.Contains(h, ":") {
			h += ":" + map[string]string{"redis-sentinel": "26379", "redis-cluster": "6379"}[scheme]
		}
		addrs = append(addrs, h)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("inspect: %q names no host", raw)
	}
	var user, pass string
	if userinfo != "" {
		u, err := url.Parse("x://" + userinfo + "@h")
		if err != nil {
			return nil, fmt.Errorf("inspect: %q: %w", raw, err)
		}
		user = u.User.Username()
		pass, _ = u.User.Password()
	}
	if scheme == "redis-cluster" {
		if path != "" {
			return nil, fmt.Errorf("inspect: %q: a cluster has no database number", raw)
		}
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Username: user, Password: pass}), nil
	}
	master, dbs, _ := strings.Cut(path, "/")
	if master == "" {
		return nil, fmt.Errorf("inspect: %q names no master (redis-sentinel://host:port/master)", raw)
	}
	db := 0
	if dbs != "" {
		if db, err = strconv.Atoi(dbs); err != nil {
			return nil, fmt.Errorf("inspect: %q: database %q is not a number", raw, dbs)
		}
	}
	return redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: master, SentinelAddrs: addrs, Username: user, Password: pass, DB: db,
		SentinelPassword: q.Get("sentinel_password"),
	}), nil
}
