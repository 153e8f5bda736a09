package leasecheck_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/lockgen/lockgen/internal/leasecheck"
)

// TestAnalyzer runs the analyzer on testdata/src/a, against a stub of the
// runtime with its real signatures; the // want comments are the
// expected reports, and every other line must stay silent.
func TestAnalyzer(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), leasecheck.Analyzer, "a")
}

// TestWithoutRuntimeImport runs the analyzer on testdata/src/quick, code
// written from the Quickstart that holds leases through a generated
// package and does not import the runtime itself: it is checked like any
// other.
func TestWithoutRuntimeImport(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), leasecheck.Analyzer, "quick")
}
