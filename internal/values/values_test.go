package values

import "testing"

func TestLatchCount(t *testing.T) {
	for v, want := range map[string]int{"3": 3, "0": 0, "2 a,b": 2, "-1": -1} {
		if n, err := LatchCount(v); err != nil || n != want {
			t.Errorf("LatchCount(%q) = %d, %v; want %d", v, n, err, want)
		}
	}
	for _, v := range []string{"", "x", " 3"} {
		if _, err := LatchCount(v); err == nil {
			t.Errorf("LatchCount(%q): no error", v)
		}
	}
}
