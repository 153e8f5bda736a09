// Package values parses the values lockgen's scripts store in Redis, for
// the runtime and inspect alike (the scripts' headers in templates/ state
// each layout).
package values

import (
	"fmt"
	"strconv"
	"strings"
)

// LatchCount parses a latch's count key: "<count>", then the operations
// of its last count-downs (see templates/latch_count_down.lua).
func LatchCount(v string) (int, error) {
	c, _, _ := strings.Cut(v, " ")
	n, err := strconv.Atoi(c)
	if err != nil {
		return 0, fmt.Errorf("not a latch count: %q", v)
	}
	return n, nil
}

// Hold is an exclusive lock's value (reentrant, fenced, simple, and the
// locks of a multi-lock), as hold_of in templates/registry.luainc reads
// it: "<owner>[ <holds>][ <token>][ @<op>,...][ w]".
type Hold struct {
	Owner   string
	Holds   int   // 1 when left out (a single hold)
	Token   int64 // a fenced lock's, else 0
	Waiters bool  // " w": waiters are registered
}

// ParseHold parses an exclusive lock's value; ok is false for an empty one.
func ParseHold(v string) (h Hold, ok bool) {
	f := strings.Fields(v)
	if len(f) == 0 {
		return Hold{}, false
	}
	h.Owner, h.Holds = f[0], 1
	nums := 0
	for _, s := range f[1:] {
		switch {
		case s == "w":
			h.Waiters = true
		case strings.HasPrefix(s, "@"): // operations' record
		default:
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				continue
			}
			if nums == 0 {
				h.Holds = int(n)
			} else {
				h.Token = n
			}
			nums++
		}
	}
	return h, true
}
