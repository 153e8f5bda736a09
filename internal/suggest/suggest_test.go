package suggest

import "testing"

func TestClosest(t *testing.T) {
	for _, tc := range []struct {
		s    string
		in   []string
		want string
	}{
		{"generat", []string{"generate", "check", "version"}, "generate"},
		{"chekc", []string{"generate", "check", "version"}, "check"},
		{"frobnicate", []string{"generate", "check", "version"}, ""},
		{"CloseRequst", []string{"CloseRequest", "Order"}, "CloseRequest"},
		{"x", nil, ""},
	} {
		if got := Closest(tc.s, tc.in); got != tc.want {
			t.Errorf("Closest(%q, %v) = %q, want %q", tc.s, tc.in, got, tc.want)
		}
	}
}
