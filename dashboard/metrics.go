package dashboard

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/lockgen/lockgen/inspect"
)

// metrics writes the observed state in Prometheus' text exposition format
// (version 0.0.4), labelled by object name and kind, never by param
// values, so the series stay few however many instances there are.
func (h *handler) metrics(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	snap, err := h.in.Snapshot(ctx)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	_ = sampleSnapshot(ctx, h.in, snap, &h.sampled) // the history's, once a minute (history.go)
	var insts []*inspect.Instance
	for _, o := range snap.Objects {
		insts = append(insts, o.Instances...)
	}
	g := inspect.NewGraph(insts)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	b := bufio.NewWriter(w)
	defer b.Flush()
	writeMetrics(b, snap, g)
}

type family struct {
	name, help string
	samples    []string
}

func writeMetrics(b *bufio.Writer, snap *inspect.Snapshot, g *inspect.Graph) {
	fams := map[string]*family{}
	var order []string
	add := func(name, help string, v float64, labels ...string) {
		f := fams[name]
		if f == nil {
			f = &family{name: name, help: help}
			fams[name] = f
			order = append(order, name)
		}
		var ls []string
		for i := 0; i+1 < len(labels); i += 2 {
			ls = append(ls, labels[i]+`="`+escape(labels[i+1])+`"`)
		}
		s := name
		if len(ls) > 0 {
			s += "{" + strings.Join(ls, ",") + "}"
		}
		f.samples = append(f.samples, s+" "+strconv.FormatFloat(v, 'g', -1, 64))
	}
	for _, o := range snap.Objects {
		obj := []string{"object", o.Name, "kind", o.Kind}
		add("lockgen_instances", "Live instances of an object found by the scan.", float64(o.Count), obj...)
		for _, g := range inspect.Gauges(o) {
			add(g.Name, g.Help, g.Value, append(obj[:len(obj):len(obj)], g.Labels...)...)
		}
	}
	add("lockgen_deadlocks", "Cycles in the wait-for graph.", float64(len(g.Cycles)))
	truncated := 0.0
	if snap.Truncated {
		truncated = 1
	}
	add("lockgen_scan_truncated", "1 when the scan stopped at its budget: the numbers are lower bounds.", truncated)
	for _, name := range order {
		f := fams[name]
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s gauge\n", f.name, f.help, f.name)
		for _, s := range f.samples {
			fmt.Fprintln(b, s)
		}
	}
}

// escape escapes a label value for the text format.
func escape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
