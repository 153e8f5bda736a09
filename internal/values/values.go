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
