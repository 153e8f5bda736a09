// Lockgen generates typed Go wrappers for the distributed locks declared
// in a YAML spec, over lockgen's runtime on Redis.
//
// A service pins the generator with the tool directive
//
//	go get -tool github.com/lockgen/lockgen/cmd/lockgen
//
// writes lockgen.yaml next to its code with a go:generate line
//
//	//go:generate go tool lockgen generate
//
// and calls the generated methods: locks.Order(orderID).Lock(ctx), with
// the runtime imported as lockrt "github.com/lockgen/lockgen/runtime".
// (The go run form of the go:generate line breaks after go mod tidy, which
// drops the generator's dependencies from go.sum.)
//
// Usage:
//
//	lockgen <command> [flags]
//
// The commands are:
//
//	generate  write the generated Go file next to the spec (or next to every spec under ./...)
//	check     fail when the spec is invalid, the generated file is stale, or (-base) the spec changed incompatibly
//	inspect   show the live state of the spec's objects in Redis; force-unlock, redrive, purge, set permits; act on one queue item by id
//	serve     serve that state as a web dashboard, with /metrics for Prometheus
//	version   print lockgen's version and the runtime API it generates for
//	schema    print the JSON Schema of the spec format, for editors
//	help      print the usage of lockgen or of a command
//
// # generate
//
//	lockgen generate [-spec lockgen.yaml]
//
// Generate reads the spec (by default lockgen.yaml in the current
// directory), validates it, and writes the generated file (the spec's
// output, by default lockgen.gen.go) into the spec's directory. The file
// is only written when its content changes, so its modification time
// says when the generated code last changed. Named param types
// ("example.com/ids.TenantID") are resolved as the go command in the
// spec's directory resolves imports.
//
// # check
//
//	lockgen check [-spec lockgen.yaml]
//
// Check does everything generate does but writes nothing. When the file
// on disk differs from what generate would write, or is missing, it
// prints a unified diff from the file on disk to the generated one and
// exits 1. Run it in CI to catch a spec that was edited without
// regenerating, or generated code that was edited by hand. It prints
// nothing when the file is up to date.
//
// # check -base
//
//	lockgen check [-spec lockgen.yaml] -base REF [-allow-breaking] [-format text|github]
//
// With -base, check also reads the spec as it was at the git revision REF
// (git show REF:path, in the work tree holding the spec) and reports what
// the change does to a rolling deploy, where old and new code run side
// by side. Breaking changes exit 1: an object renamed (with the hint to
// add id: OldName, which keeps its keys) or removed, its key pattern,
// param order or param types changed, a lock's kind or an object's
// section changed, the namespace changed, a queue's codec changed, or its
// payload type changed incompatibly. Payload types are compared by what
// the codec encodes: the old type is loaded with go/packages from the
// module's tree at REF (extracted to a temporary directory), the new one
// from the working tree; a field removed or retyped is breaking, an added
// one is not, and a renamed type with compatible fields is a warning.
// When the old tree cannot be loaded, the types are compared by name.
// Changes of lease, renew, wait, permits, count, expire, rate, per,
// burst, algorithm, scope, delay and reliable are warnings (exit 0).
// -allow-breaking reports breaking changes but exits 0. -format github
// prints GitHub Actions annotations (::error file=…,line=…,col=…::message)
// so that the findings appear on the pull request's diff. It is an error
// when the spec is not in a git work tree or REF does not name a commit;
// a spec that did not exist at REF has nothing to compare.
//
// # Several specs
//
//	lockgen generate ./...
//	lockgen check ./... [-base REF]
//
// Instead of -spec, generate and check take directories: ./shop (its
// lockgen.yaml) or ./... (every lockgen.yaml in and below the current
// directory; like the go command, it skips testdata, vendor, directories
// starting with '.' or '_', and nested modules). Objects of different
// specs that would share keys (the same namespace and the same id or
// name) are an error naming both positions, and nothing is written.
//
// Whether with -spec or with patterns, a spec whose package differs from
// the package of the Go files already in its directory is an error
// reported before anything is written, and the specs named are checked
// against the other specs of their module (those ./... from the module's
// root finds; only those in a namespace of the named specs are parsed):
// with a go:generate line in each spec's directory, go generate ./...
// stops at the first spec whose objects share keys with another's,
// naming both positions, as check ./... does. Each run reads the
// module's tree: see the README for what that costs on a large module,
// where one line at the root, lockgen generate ./..., reads it once.
//
// # Problems with the spec
//
// generate and check print every problem they find in the spec, one per
// line, as file:line:col: message (hint), and exit 1. Problems found when
// the spec is read and those found when its param and payload types are
// resolved (a type that does not exist or cannot be a key param, a param
// name that cannot be a Go parameter) are reported in the same run, as
// far as what was read allows (a param with a bad type is not resolved).
//
// # inspect
//
//	lockgen inspect -redis URL [-spec lockgen.yaml] [-json] [-yes] [action] [Object [params...]]
//
// Inspect reads the live state of the spec's objects from Redis: without
// an object, every object with a summary and any deadlock in the
// wait-for graph; with an object, its live instances (found with SCAN
// within -max-scan keys per node, params decoded from the keys); with
// params, one instance in detail. -json prints JSON. The actions
// -force-unlock, -redrive n (0: all), -purge and -set-permits n (0: the
// spec's) apply to one instance and ask for confirmation unless -yes.
//
// A queue instance lists its items with their ids (ready; delayed with
// the time until due; in flight with the attempt and the time until
// redelivery; dead with the reason); an object without params shows its
// one instance so. -item ID shows one item (no such item exits 1). The
// actions -remove ID (a ready, delayed or dead item), -redrive-id ID (a
// dead letter, back at the end of the queue), -run-now ID (a delayed
// item, ready now) and -bury ID [-reason text] (a ready or delayed item,
// to the dead letters) act on one item, atomically, and ask first unless
// -yes. -pause and -resume pause and resume a queue instance's consumers
// (producers keep offering; its Takes and workers take nothing while it
// is paused, which the listing shows), without asking. An item enqueued
// under a unique key shows it. Run twice, they change nothing and say the item is gone (or ready
// already), exiting 0; an item the action does not apply to (a remove of
// one in flight) exits 1. With -json, an item action prints its result
// ({"action", "key", "id", "was", "done"}) on stdout.
//
// A schedule shows its last tick, when and by which client id it fired,
// its next tick, and whether it is paused; -pause and -resume Object
// pause or resume it on every replica (not asked first: one undoes the
// other).
// URLs: redis://host:port[/db] (rediss:// for TLS),
// redis-sentinel://host:port[,host:port...]/master[/db],
// redis-cluster://host:port[,host:port...].
//
// # serve
//
//	lockgen serve -redis URL [-spec lockgen.yaml] [-addr 127.0.0.1:8080] [-read-only] [-refresh 2s]
//	              [-token-file FILE] [-allow-host NAME,...]
//
// Serve serves what inspect shows as a web page that refreshes itself,
// with the same actions (confirmed in the page; refused with
// -read-only), and the observed state at /metrics in Prometheus' text
// format. It listens on loopback unless told otherwise. The same page is
// a package for services to mount: github.com/lockgen/lockgen/dashboard.
//
// On an address other hosts reach (":8080", "0.0.0.0:8080", a
// non-loopback IP or name) serve refuses to start (exit 2) with actions
// enabled unless a token is given: -token-file FILE, else
// $LOCKGEN_DASHBOARD_TOKEN, at least 16 characters. With a token the API
// and /metrics need "Authorization: Bearer TOKEN"; the page asks for it
// once per tab, or takes it from its address' fragment
// (http://host:8080/#token=TOKEN, never sent to a server). The page is
// served only to a Host header naming an IP, localhost, the -addr name
// or an -allow-host name (DNS rebinding), and an action from another
// origin is refused.
//
// # Exit status
//
//	0  success; for check, the generated file is up to date
//	1  the spec is invalid or cannot be read, the generated file could not
//	   be written, or check found a stale or missing file
//	2  usage error: an unknown command, a bad flag or an extra argument
//
// Every command accepts -h (or -help) to print its usage and exit 0.
package main
