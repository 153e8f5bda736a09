// Package benchred holds the RedLock of the RedLock benchmarks, generated
// by lockgen from lockgen.yaml.
package benchred

//go:generate go run github.com/lockgen/lockgen/cmd/lockgen generate
