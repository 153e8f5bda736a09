package main

import (
	"context"
	"testing"

	"github.com/lockgen/lockgen/scripts/redistest"
)

// TestDemo runs the demo against a real redis-server; the demo returns an
// error whenever the queue behaves other than it narrates.
func TestDemo(t *testing.T) {
	t.Setenv("REDIS_ADDR", redistest.Single(t).Addr)
	if err := run(context.Background()); err != nil {
		t.Fatal(err)
	}
}
