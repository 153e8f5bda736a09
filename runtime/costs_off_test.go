//go:build !costs

package runtime_test

// costsChecked: in the correctness suite the tests log the costs they
// measure under contention but do not hold them to a tolerance (a loaded
// machine raises them); make costs builds with -tags costs, which checks
// them (costs_on_test.go).
const costsChecked = false
