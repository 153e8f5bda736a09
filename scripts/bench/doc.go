// Package bench compares lockgen's runtime with the Go peers redsync and
// bsm/redislock on one local redis-server. It is a module of its own, so
// the peers never become dependencies of lockgen; everything is in its
// _test.go files. See README.md for how to run it and what it measures.
package bench
