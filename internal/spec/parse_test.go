package spec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// parseValid parses testdata/specs/valid/name and fails the test on error.
func parseValid(t *testing.T, name string) *Spec {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(specsDir, "valid", name))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse(name, data)
	if err != nil {
		t.Fatalf("Parse(%s):\n%v", name, err)
	}
	return s
}

func TestValidSpecsParse(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(specsDir, "valid", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no valid specs: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			s := parseValid(t, filepath.Base(file))
			checkSorted(t, s)
		})
	}
}

// checkSorted checks every object list is sorted by name, and every key
// has one more literal than params.
func checkSorted(t *testing.T, s *Spec) {
	t.Helper()
	var objs [][]Object
	var o []Object
	for _, l := range s.Locks {
		o = append(o, l.Object)
	}
	objs, o = append(objs, o), nil
	for _, l := range s.Semaphores {
		o = append(o, l.Object)
	}
	objs, o = append(objs, o), nil
	for _, l := range s.Latches {
		o = append(o, l.Object)
	}
	objs, o = append(objs, o), nil
	for _, l := range s.Limiters {
		o = append(o, l.Object)
	}
	objs, o = append(objs, o), nil
	for _, l := range s.Queues {
		o = append(o, l.Object)
	}
	objs = append(objs, o)
	for _, list := range objs {
		for i, o := range list {
			if i > 0 && list[i-1].Name >= o.Name {
				t.Errorf("objects not sorted by name: %s before %s", list[i-1].Name, o.Name)
			}
			if len(o.Key.Literals) != len(o.Key.Params)+1 {
				t.Errorf("%s: %d literals for %d params", o.Name, len(o.Key.Literals), len(o.Key.Params))
			}
		}
	}
}

func TestMinimal(t *testing.T) {
	s := parseValid(t, "minimal.yaml")
	want := &Spec{
		File: "minimal.yaml", Version: 1, Package: "locks", Namespace: "app", Output: DefaultOutput,
		Defaults: Defaults{Lease: 30 * time.Second, Wait: 10 * time.Second},
		Fields: map[string]Pos{
			"version": {"minimal.yaml", 2, 10}, "package": {"minimal.yaml", 3, 10},
			"namespace": {"minimal.yaml", 4, 12}, "locks": {"minimal.yaml", 6, 3},
		},
		Locks: []*Lock{{
			Object: Object{
				Name: "Migrations", Section: "locks", Pos: Pos{"minimal.yaml", 6, 3},
				Key:    Key{Pattern: "migrations", Pos: Pos{"minimal.yaml", 6, 22}, Literals: []string{"migrations"}},
				Fields: map[string]Pos{"key": {"minimal.yaml", 6, 22}},
			},
			Kind: Reentrant, KindPos: Pos{"minimal.yaml", 6, 3}, Lease: 30 * time.Second, Renew: true, Wait: 10 * time.Second,
		}},
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("got  %s\nwant %s", dump(s), dump(want))
	}
}

func dump(s *Spec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%+v", *s)
	for _, l := range s.Locks {
		fmt.Fprintf(&b, "\n  %+v", *l)
	}
	return b.String()
}

func TestDesignExample(t *testing.T) {
	s := parseValid(t, "design.yaml")
	if s.Package != "shoplocks" || s.Namespace != "shop" || s.Output != "lockgen.gen.go" {
		t.Errorf("package %q namespace %q output %q", s.Package, s.Namespace, s.Output)
	}
	if len(s.Locks) != 1 || len(s.Semaphores) != 1 || len(s.Latches) != 1 || len(s.Limiters) != 1 || len(s.Queues) != 1 {
		t.Fatalf("got %d locks, %d semaphores, %d latches, %d limiters, %d queues; want one each",
			len(s.Locks), len(s.Semaphores), len(s.Latches), len(s.Limiters), len(s.Queues))
	}
	l := s.Locks[0]
	if l.Name != "Order" || l.Description != "Serialises changes to one order." || l.Kind != Reentrant ||
		l.Lease != 30*time.Second || !l.Renew || l.Wait != 5*time.Second {
		t.Errorf("lock: %+v", *l)
	}
	if l.Pos != (Pos{"design.yaml", 7, 3}) || l.KindPos != (Pos{"design.yaml", 9, 11}) || l.Key.Pos != (Pos{"design.yaml", 10, 10}) {
		t.Errorf("lock positions: %v %v %v", l.Pos, l.KindPos, l.Key.Pos)
	}
	wantParams := []Param{{Name: "orderID", Type: ParamType{Basic: "int64"}, Pos: Pos{"design.yaml", 11, 24}}}
	if !reflect.DeepEqual(l.Key.Params, wantParams) || !reflect.DeepEqual(l.Key.Literals, []string{"order:", ""}) {
		t.Errorf("lock key: %+v", l.Key)
	}
	if m := s.Semaphores[0]; m.Name != "Export" || m.Permits != 4 || m.Lease != 2*time.Minute || !m.Renew || m.Wait != 10*time.Second {
		t.Errorf("semaphore: %+v", *m)
	}
	if c := s.Latches[0]; c.Name != "Warmup" || c.Count != 3 || c.Expire != 24*time.Hour {
		t.Errorf("latch: %+v", *c)
	}
	if r := s.Limiters[0]; r.Name != "API" || r.Algorithm != GCRA || r.Rate != 100 || r.Per != time.Minute || r.Burst != 20 || r.Scope != ScopeOverall {
		t.Errorf("limiter: %+v", *r)
	}
	q := s.Queues[0]
	if q.Name != "OrderClose" || q.Codec != "json" || !q.Delay || q.Key.Pattern != "order-close" || len(q.Key.Params) != 0 {
		t.Errorf("queue: %+v", *q)
	}
	if q.Payload != (PayloadType{ImportPath: "github.com/acme/shop/orders", TypeName: "CloseRequest"}) || q.PayloadPos != (Pos{"design.yaml", 26, 14}) {
		t.Errorf("queue payload: %v at %v", q.Payload, q.PayloadPos)
	}
	if q.Reliable == nil || *q.Reliable != (Reliable{Visibility: 30 * time.Second, MaxDeliveries: 5}) {
		t.Errorf("queue reliable: %+v", q.Reliable)
	}
}

func TestAllOptions(t *testing.T) {
	s := parseValid(t, "all-options.yaml")
	if s.Namespace != "acme.inventory-v2" || s.Output != "locks_gen.go" || s.Defaults != (Defaults{Lease: time.Minute, Wait: 15 * time.Second}) {
		t.Errorf("top level: %q %q %+v", s.Namespace, s.Output, s.Defaults)
	}
	var names []string
	kinds := map[string]LockKind{}
	for _, l := range s.Locks {
		names = append(names, l.Name)
		kinds[l.Name] = l.Kind
	}
	if got := strings.Join(names, " "); got != "Checkout Ledger Payout Reindex Session Settlement Stock" {
		t.Errorf("locks in order %s", got)
	}
	if len(kinds) != len(LockKinds) {
		t.Errorf("want every lock kind once, got %v", kinds)
	}
	if ledger := s.Locks[1]; ledger.Sync == nil || *ledger.Sync != (Sync{Replicas: 1, Timeout: 500 * time.Millisecond}) || s.Locks[0].Sync != nil {
		t.Errorf("Ledger sync: %+v, Checkout sync: %+v", ledger.Sync, s.Locks[0].Sync)
	}
	stock := s.Locks[6]
	if stock.Kind != ReadWrite || stock.Lease != 10*time.Second || stock.Renew || stock.Wait != 0 {
		t.Errorf("Stock: %+v", *stock)
	}
	wantParams := []Param{
		{Name: "warehouse", Type: ParamType{Basic: "uint16"}, Pos: Pos{"all-options.yaml", 16, 18}},
		{Name: "sku", Type: ParamType{ImportPath: "github.com/acme/inventory/ids", TypeName: "SKU"}, Pos: Pos{"all-options.yaml", 17, 12}},
	}
	if !reflect.DeepEqual(stock.Key.Params, wantParams) || !reflect.DeepEqual(stock.Key.Literals, []string{"warehouse:", ":item:", ""}) {
		t.Errorf("Stock key: %+v", stock.Key)
	}
	if c := s.Locks[0]; c.Name != "Checkout" || c.Wait != 2*time.Minute || c.Lease != time.Minute || !c.Renew {
		t.Errorf("Checkout: %+v", *c)
	}
	if p := s.Locks[2]; p.Name != "Payout" || !reflect.DeepEqual(p.Key.Literals, []string{"payout:", ":run"}) {
		t.Errorf("Payout: %+v", p.Key)
	}
	cr := s.Semaphores[0]
	if cr.Description != "Limits concurrent crawls of one host.\nEach holder fetches one page at a time." || cr.Permits != 8 || cr.Renew || cr.Wait != 0 || cr.Lease != 45*time.Second {
		t.Errorf("Crawler: %+v", *cr)
	}
	if b := s.Latches[0]; b.Count != 16 || b.Expire != 90*time.Minute || len(b.Key.Params) != 2 {
		t.Errorf("Boot: %+v", *b)
	}
	lim := map[string]*Limiter{}
	for _, l := range s.Limiters {
		lim[l.Name] = l
	}
	if l := lim["Login"]; l.Algorithm != SlidingWindow || l.Scope != ScopePerClient || l.Burst != 0 {
		t.Errorf("Login: %+v", *l)
	}
	if l := lim["Search"]; l.Algorithm != TokenBucket || l.Key.Params[0].Type != (ParamType{ImportPath: "time", TypeName: "Month"}) {
		t.Errorf("Search: %+v", *l)
	}
	if l := lim["Export"]; l.Per != 24*time.Hour || l.Burst != 3 || l.Scope != ScopeOverall {
		t.Errorf("Export: %+v", *l)
	}
	q := map[string]*Queue{}
	for _, x := range s.Queues {
		q[x.Name] = x
	}
	if x := q["Audit"]; x.Payload != (PayloadType{TypeName: "[]byte"}) || x.Reliable != nil || x.Delay {
		t.Errorf("Audit: %+v", *x)
	}
	if x := q["Notes"]; x.Payload.String() != "string" || !x.Delay || *x.Reliable != (Reliable{Visibility: 1500 * time.Millisecond, MaxDeliveries: 1}) {
		t.Errorf("Notes: %+v", *x)
	}
	if x := q["Restock"]; x.Payload.String() != "github.com/acme/inventory/orders.Restock" || x.Reliable.MaxDeliveries != DefaultMaxDeliveries || x.Reliable.Visibility != 2*time.Minute {
		t.Errorf("Restock: %+v", *x)
	}
}

func TestFlowStyle(t *testing.T) {
	s := parseValid(t, "flow.yaml")
	if s.Defaults != (Defaults{Lease: 20 * time.Second, Wait: 3 * time.Second}) {
		t.Errorf("defaults %+v", s.Defaults)
	}
	tenant := s.Locks[1]
	// params are in placeholder order, not in the order they are declared
	if tenant.Name != "Tenant" || tenant.Key.Params[0].Name != "org" || tenant.Key.Params[1].Name != "team" ||
		tenant.Key.Params[0].Type.String() != "example.com/ids.OrgID" || tenant.Lease != 20*time.Second {
		t.Errorf("Tenant: %+v", *tenant)
	}
	if j := s.Locks[0]; j.Kind != Fair || j.Wait != 3*time.Second {
		t.Errorf("Job: %+v", *j)
	}
	if m := s.Queues[0]; m.Reliable.Visibility != 10*time.Second || m.Payload.TypeName != "Message" {
		t.Errorf("Mail: %+v", *m)
	}
}

func TestUnicode(t *testing.T) {
	s := parseValid(t, "unicode.yaml")
	if s.Package != "café" || len(s.Locks) != 2 {
		t.Fatalf("package %q, %d locks", s.Package, len(s.Locks))
	}
	u := s.Locks[1]
	if u.Name != "Ünïcode" || u.Description != "Sérialise les commandes — 注文ごとに一つ 🔒" {
		t.Errorf("Ünïcode: %q %q", u.Name, u.Description)
	}
	if got := []string{u.Key.Params[0].Name, u.Key.Params[1].Name}; got[0] != "numéro" || got[1] != "größe" {
		t.Errorf("params %v", got)
	}
	if e := s.Locks[0]; e.Description != "🔐 it's fine" || e.Key.Literals[0] != "ключ:" {
		t.Errorf("Émoji: %+v", *e)
	}
}

func TestAnchors(t *testing.T) {
	s := parseValid(t, "anchors.yaml")
	inv, ref := s.Locks[0], s.Locks[1]
	if inv.Lease != 5*time.Second || inv.Wait != time.Second || inv.Renew {
		t.Errorf("Invoice: %+v", *inv)
	}
	if ref.Wait != 0 || ref.Lease != 5*time.Second {
		t.Errorf("Refund: %+v", *ref)
	}
	if inv.Key.Params[0].Type.TypeName != "TenantID" {
		t.Errorf("Invoice params: %+v", inv.Key.Params)
	}
	if r := s.Semaphores[0]; r.Lease != 5*time.Second || r.Permits != 2 {
		t.Errorf("Report: %+v", *r)
	}
}

func TestEmptySections(t *testing.T) {
	s := parseValid(t, "empty-sections.yaml")
	if len(s.Locks)+len(s.Semaphores)+len(s.Latches)+len(s.Limiters)+len(s.Queues) != 0 {
		t.Errorf("want no objects: %+v", s)
	}
}

func TestDiagnosticString(t *testing.T) {
	d := Diagnostic{Pos: Pos{"a.yaml", 3, 7}, Msg: "bad", Hint: "fix it"}
	if got := d.String(); got != "a.yaml:3:7: bad (fix it)" {
		t.Errorf("String() = %q", got)
	}
	d.Hint = ""
	if got := d.String(); got != "a.yaml:3:7: bad" {
		t.Errorf("String() = %q", got)
	}
	ds := Diagnostics{d, {Pos: Pos{"a.yaml", 4, 1}, Msg: "worse", Hint: "h"}}
	if got := ds.Error(); got != "a.yaml:3:7: bad\na.yaml:4:1: worse (h)" {
		t.Errorf("Error() = %q", got)
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(specsDir, "valid", "minimal.yaml")
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.File != path || s.Locks[0].Pos.File != path {
		t.Errorf("File %q, position file %q; want %q", s.File, s.Locks[0].Pos.File, path)
	}
	_, err = Load(filepath.Join(t.TempDir(), "missing.yaml"))
	var ds Diagnostics
	if !errors.Is(err, os.ErrNotExist) || errors.As(err, &ds) {
		t.Errorf("Load of a missing file: %v, want a wrapped os.ErrNotExist", err)
	}
	_, err = Load(filepath.Join(specsDir, "invalid", "empty.yaml"))
	if !errors.As(err, &ds) || len(ds) != 1 {
		t.Errorf("Load of an invalid spec: %v, want Diagnostics", err)
	}
}

// TestSmallCases checks small cases not worth a golden file.
func TestSmallCases(t *testing.T) {
	const head = "version: 1\npackage: p\nnamespace: n\n"
	for _, tc := range []struct {
		name, spec, want string // want: substring of the error, or "" for no error
	}{
		{"crlf", strings.ReplaceAll(head+"locks:\n  A: { key: \"a:{x}\" }\n", "\n", "\r\n"), "s.yaml:5:16: lock A: placeholder {x} has no param"},
		{"bom", "\ufeff" + head, ""},
		{"escaped quote column", head + "locks:\n  A: { key: \"\\u0061:{x}\" }\n", "s.yaml:5:13: lock A: placeholder {x} has no param"},
		{"single quoted column", head + "locks:\n  A: { key: 'it''s:{x}' }\n", "s.yaml:5:13: lock A: placeholder {x} has no param"},
		{"plain column", head + "locks:\n  A:\n    key: a:{x}\n", "s.yaml:6:12: lock A: placeholder {x} has no param"},
		{"block scalar key", head + "locks:\n  A:\n    key: |-\n      a:{x}\n", "s.yaml:6:10: lock A: placeholder {x} has no param"},
		{"output", head + "output: .go\n", `output ".go" would be ignored`},
		{"hidden output", head + "output: .locks.go\n", "would be ignored"},
		{"version null", "version:\npackage: p\nnamespace: n\n", "version has no value"},
		{"version 0", "version: 0\npackage: p\nnamespace: n\n", "spec version 0 is not supported"},
		{"huge version", "version: 99999999999999999999\npackage: p\nnamespace: n\n", "version"},
		{"scalar document", "hello\n", "spec must be a mapping of fields, not a string"},
		{"null document", "~\n", "spec is empty"},
		{"empty input", "", "s.yaml:1:1: spec is empty"},
		{"merge cycle", head + "x-a: &a\n  <<: *a\n", ""},
		{"merge list of non-maps", head + "locks:\n  A: { <<: [1], key: a }\n", "merge (<<) of an integer"},
		{"alias key", head + "x-k: &k key\nlocks:\n  A: { *k : a }\n", ""},
		{"non-string description", head + "locks:\n  A: { key: a, description: 42 }\n", ""},
		{"description list", head + "locks:\n  A: { key: a, description: [x] }\n", "description must be a string, not a list"},
		{"negative huge", head + "semaphores:\n  A: { key: a, permits: -99999999999 }\n", "permits must be at least 1, not -2147483647"},
		{"hex number", head + "semaphores:\n  A: { key: a, permits: 0x10 }\n", ""},
		{"float duration", head + "defaults: { lease: 1.5 }\n", `"1.5s" is 1.5 seconds`},
		{"invalid utf8", head + "locks:\n  A: { key: \"\xff\" }\n", "invalid YAML"},
		{"reliable null", head + "queues:\n  Q: { key: q, payload: string, reliable: }\n", "reliable has no value"},
		{"doc merge example", head + "x-short: &short { lease: 5s, wait: 1s, renew: false }\nlocks:\n  Invoice: { <<: *short, key: \"invoice:{id}\", params: { id: int64 } }\n", ""},
		{"params null", head + "locks:\n  A: { key: \"a:{x}\", params: }\n", "params has no value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse("s.yaml", []byte(tc.spec))
			if tc.want == "" {
				if err != nil || s == nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse succeeded, want %q", tc.want)
			}
			var ds Diagnostics
			if !errors.As(err, &ds) {
				t.Fatalf("error %T, want Diagnostics", err)
			}
			checkDiagnostics(t, ds)
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got:\n%v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

// TestAliasExpansion checks a small spec whose aliases expand to a
// million fields is cut short, with a diagnostic, after reading no more
// mapping entries than its budget (a count, not a time: the machine may be
// busy).
func TestAliasExpansion(t *testing.T) {
	var b strings.Builder
	b.WriteString("version: 1\npackage: p\nnamespace: n\nx-p: &p {")
	for i := range 1000 {
		fmt.Fprintf(&b, "a%d: string, ", i)
	}
	b.WriteString("}\nx-o: &o {key: k, params: *p}\nlocks: {")
	for i := range 1000 {
		fmt.Fprintf(&b, "A%d: *o, ", i)
	}
	b.WriteString("}\n")
	_, err := Parse("bomb.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "spec expands to too many fields through aliases") {
		t.Fatalf("want an alias expansion error, got %.300v", err)
	}
	p := &parser{file: "bomb.yaml", src: []byte(b.String()), names: map[string]declared{}, reported: map[Diagnostic]bool{}}
	p.parse()
	if !p.overBudget || p.entriesRead > p.budgetGiven {
		t.Errorf("read %d mapping entries with a budget of %d (over budget: %v)", p.entriesRead, p.budgetGiven, p.overBudget)
	}
	if p.budgetGiven > 100000 {
		t.Errorf("budget %d for a %d-byte spec", p.budgetGiven, b.Len())
	}
}

func TestDurationHintSingular(t *testing.T) {
	_, err := Parse("x.yaml", []byte("version: 1\npackage: p\nnamespace: n\nlocks:\n  A: { key: a, wait: 1, lease: 2 }\n"))
	got := err.Error()
	for _, want := range []string{`"1s" is 1 second)`, `"2s" is 2 seconds)`} {
		if !strings.Contains(got, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, got)
		}
	}
}
