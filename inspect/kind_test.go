package inspect

import (
	"testing"

	"github.com/lockgen/lockgen/internal/spec"
)

// TestKindPerSection checks that every section of the kind table has its
// kind in inspect (a file registering it), every lock kind its name, and
// that no kind is registered for a section the table lacks: a kind added
// to spec.Kinds without its inspect file fails here.
func TestKindPerSection(t *testing.T) {
	sections := map[string]bool{}
	for _, k := range spec.Kinds {
		sections[k.Section] = true
		if kindOfSection[k.Section] == nil {
			t.Errorf("section %s of spec.Kinds has no kind in inspect (register)", k.Section)
		}
	}
	for s := range kindOfSection {
		if !sections[s] {
			t.Errorf("inspect registers a kind for %s, which spec.Kinds lacks", s)
		}
	}
	for _, lk := range spec.LockKinds {
		if kindNamed[string(lk)] != kindOfSection["locks"] {
			t.Errorf("lock kind %s is not reported as a lock", lk)
		}
	}
	if _, ok := kindOf("barrier").(noKind); !ok {
		t.Error("an unknown kind name has a kind")
	}
}

// TestMsText holds msText to the page's former ms() (JavaScript's
// toFixed rounds the double's exact value, ties up): checked against it
// for every value up to 70 s and a sample up to 11 h.
func TestMsText(t *testing.T) {
	for v, want := range map[int64]string{
		-1: "no expiry", -2: "no expiry", 0: "0ms", 999: "999ms", 1000: "1.0s", 1150: "1.1s", 1250: "1.3s",
		59999: "60.0s", 60000: "1m0s", 61999: "1m1s", 3599999: "59m59s", 3600000: "1.0h", 5400000: "1.5h",
	} {
		if got := msText(v); got != want {
			t.Errorf("msText(%d) = %q, want %q", v, got, want)
		}
	}
}
