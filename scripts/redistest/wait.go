package redistest

import "time"

// Poll is how often Within looks again.
const Poll = 5 * time.Millisecond

// Within reports whether cond holds within d, asking every Poll: the one
// wait on observable state the tests of every package share (the
// runtime's eventually, inspect's, the dashboard's and the CLI's). Its
// deadline only bounds a failure: the wait ends as soon as cond holds.
func Within(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); !cond(); time.Sleep(Poll) {
		if time.Now().After(end) {
			return false
		}
	}
	return true
}
