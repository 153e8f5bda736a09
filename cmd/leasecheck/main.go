// Leasecheck reports lockgen leases and permits that are not released on
// every path, and work inside a hold that uses the caller's context
// instead of the lease's. See package internal/leasecheck for the rules.
//
// Run it on its own:
//
//	go run github.com/lockgen/lockgen/cmd/leasecheck ./...
//
// or through go vet, with the other vet checks:
//
//	go build -o leasecheck github.com/lockgen/lockgen/cmd/leasecheck
//	go vet -vettool=$PWD/leasecheck ./...
package main

import (
	"golang.org/x/tools/go/analysis/singlechecker"

	"github.com/lockgen/lockgen/internal/leasecheck"
)

func main() { singlechecker.Main(leasecheck.Analyzer) }
