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
