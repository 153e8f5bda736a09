package impl

import (
	"reflect"
	"testing"
)

// TestKindsNameTheirScripts: every script a kind's set names is one of
// the runtime's (a misspelt name would reach users as a mismatch error
// only when the kind's call runs), and Names lists each once.
func TestKindsNameTheirScripts(t *testing.T) {
	p := Own()
	sets := map[string]any{
		"redlock": p.RedLocks(), "semaphore": p.Semaphores(), "latch": p.Latches(),
		"queue": p.Queues(), "schedule": p.Schedules(),
	}
	for k := range lockSets {
		sets["lock "+k.String()] = p.Locks(k)
	}
	for a := range limiterAllow {
		sets["limiter "+a.String()] = p.Limiters(a)
	}
	for kind, set := range sets {
		names := Names(set)
		if len(names) == 0 {
			t.Errorf("%s: no scripts", kind)
		}
		seen := map[string]bool{}
		for _, name := range names {
			if seen[name] {
				t.Errorf("%s: Names lists %s twice", kind, name)
			}
			seen[name] = true
		}
		v := reflect.ValueOf(set).Elem()
		for i := range v.NumField() {
			if s, ok := v.Field(i).Interface().(*Script); ok && s != nil && (s.Err != nil || s.Source == "") {
				t.Errorf("%s: %s names script %q: %v", kind, v.Type().Field(i).Name, s.Name, s.Err)
			}
		}
	}
}
