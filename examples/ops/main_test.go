package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/lockgen/lockgen/scripts/redistest"
)

// TestDemo runs the operator demo against a real redis-server and checks
// that inspect's output shows what the demo's clients hold.
func TestDemo(t *testing.T) {
	t.Setenv("REDIS_ADDR", redistest.Single(t).Addr)
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), f, ""); err != nil {
		t.Fatal(err)
	}
	out, _ := os.ReadFile(f.Name())
	for _, want := range []string{
		"2 ready, 1 delayed, 1 in flight, 1 dead",
		"3/4 permits in use",
		"smtp: 550 mailbox unavailable",
		"held by read billing:3",
		"go run ./examples/ops -serve",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}
}
