// Package benchlimits holds the rate limiters of the benchmarks, generated
// by lockgen from lockgen.yaml.
package benchlimits

//go:generate go run github.com/lockgen/lockgen/cmd/lockgen generate
