package prometheus_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/lockgen/lockgen/dashboard"
	"github.com/lockgen/lockgen/examples/ops/demo"
	"github.com/lockgen/lockgen/inspect"
	"github.com/lockgen/lockgen/scripts/redistest"
)

// TestDashboardMetrics scrapes the dashboard's /metrics (the observed
// state of examples/ops after demo.Populate) and parses it with
// Prometheus' own text parser (expfmt), lints it with promlint, and
// checks the values and that no label carries a param value. The
// dashboard lives in the main module, which does not depend on Prometheus;
// this module does.
func TestDashboardMetrics(t *testing.T) {
	rdb := redistest.Single(t).Client()
	ctx := context.Background()
	done, err := demo.Populate(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	in, err := inspect.Load(rdb, "../../examples/ops/shopops/lockgen.yaml", inspect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	srv := httptest.NewServer(dashboard.New(in, dashboard.Options{}))
	defer srv.Close()

	r, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if ct := expfmt.ResponseFormat(r.Header); ct.FormatType() != expfmt.TypeTextPlain {
		t.Errorf("Content-Type %q is not Prometheus' text format", r.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r.Body)
	if err != nil {
		t.Fatalf("Prometheus' parser rejects /metrics: %v", err)
	}
	var fams []*dto.MetricFamily
	values := map[string]float64{}
	for name, mf := range mfs {
		fams = append(fams, mf)
		if mf.GetType() != dto.MetricType_GAUGE {
			t.Errorf("%s is a %v, want a gauge", name, mf.GetType())
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), "acme") || strings.Contains(l.GetValue(), "42") {
					t.Errorf("%s: a param value in label %s=%q", name, l.GetName(), l.GetValue())
				}
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			slices.Sort(labels)
			values[name+"{"+strings.Join(labels, ",")+"}"] = m.GetGauge().GetValue()
		}
	}
	for series, want := range map[string]float64{
		"lockgen_locks_held{kind=reentrant,object=Order}":                1,
		"lockgen_locks_held{kind=fenced,object=Ledger}":                  1,
		"lockgen_semaphore_permits_in_use{kind=semaphore,object=Export}": 3,
		"lockgen_queue_items{kind=queue,object=Email,state=ready}":       2,
		"lockgen_queue_items{kind=queue,object=Email,state=delayed}":     1,
		"lockgen_queue_items{kind=queue,object=Email,state=in_flight}":   1,
		"lockgen_queue_dead_letters{kind=queue,object=Email}":            1,
	} {
		if got, ok := values[series]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	problems, err := promlint.NewWithMetricFamilies(fams).Lint()
	if err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %+v", err, problems)
	}
}
