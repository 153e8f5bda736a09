//go:build costs

package runtime_test

// costsChecked: built with -tags costs (make costs), the tests also check
// the costs they measure under contention against their tolerances
// (scripts and commands per acquisition, which a loaded machine raises:
// late wake-ups, refreshes, retries). See costs_off_test.go.
const costsChecked = true
