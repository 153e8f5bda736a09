package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockgen/lockgen/scripts/redistest"
)

// TestInspectSchedule: lockgen inspect shows a schedule (never fired, its
// next tick) and pauses and resumes it on every replica (the paused field
// of its state in Redis).
func TestInspectSchedule(t *testing.T) {
	node := redistest.Single(t)
	dir := t.TempDir()
	specPath := filepath.Join(dir, "lockgen.yaml")
	if err := os.WriteFile(specPath, []byte("version: 1\npackage: jobs\nnamespace: jobs\nschedules:\n  Nightly: { cron: \"0 3 * * *\", timezone: Europe/Paris }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	url := "redis://" + node.Addr
	code, out, errs := lockgen(t, "inspect", "-spec", specPath, "-redis", url)
	if code != 0 || !strings.Contains(out, "Nightly") || !strings.Contains(out, "never fired") || !strings.Contains(out, "next ") {
		t.Fatalf("summary: exit %d\n%s\n%s", code, out, errs)
	}
	paused := func() string {
		v, _ := node.Client().HGet(context.Background(), "jobs:{Nightly:}", "paused").Result()
		return v
	}
	code, out, errs = lockgen(t, "inspect", "-spec", specPath, "-redis", url, "-pause", "Nightly")
	if code != 0 || paused() != "1" {
		t.Fatalf("pause: exit %d, paused %q\n%s\n%s", code, paused(), out, errs)
	}
	code, out, _ = lockgen(t, "inspect", "-spec", specPath, "-redis", url, "Nightly")
	if code != 0 || !strings.Contains(out, "paused") {
		t.Fatalf("instance: exit %d\n%s", code, out)
	}
	code, out, errs = lockgen(t, "inspect", "-spec", specPath, "-redis", url, "-resume", "Nightly")
	if code != 0 || paused() != "" {
		t.Fatalf("resume: exit %d, paused %q\n%s\n%s", code, paused(), out, errs)
	}
}
