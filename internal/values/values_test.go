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

func TestParseHold(t *testing.T) {
	for v, want := range map[string]Hold{
		"a:1":             {Owner: "a:1", Holds: 1},
		"a:1 w":           {Owner: "a:1", Holds: 1, Waiters: true},
		"a:1 3":           {Owner: "a:1", Holds: 3},
		"a:1 2 @5,3 w":    {Owner: "a:1", Holds: 2, Waiters: true},
		"a:1 1 17":        {Owner: "a:1", Holds: 1, Token: 17},
		"a:1 2 17 @0,4 w": {Owner: "a:1", Holds: 2, Token: 17, Waiters: true},
	} {
		if h, ok := ParseHold(v); !ok || h != want {
			t.Errorf("ParseHold(%q) = %+v, %v; want %+v", v, h, ok, want)
		}
	}
	if _, ok := ParseHold(""); ok {
		t.Error("ParseHold(\"\"): ok")
	}
}
