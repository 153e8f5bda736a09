package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/inspect"
	"github.com/lockgen/lockgen/internal/spec"
)

// The operator's commands live here, apart from main.go, and join the
// command table and dispatch at init.
func init() {
	var rest []struct{ name, args, summary string }
	for _, cmd := range commands {
		if cmd.name == "version" {
			rest = append(rest,
				struct{ name, args, summary string }{"inspect", "-redis URL [-spec lockgen.yaml] [-json] [-yes] [action] [Object [params...]]", "Show the live state of the spec's objects in Redis; force-unlock, redrive, purge, set permits; pause or resume a queue or a schedule; show, remove, dead-letter, redrive or run one queue item by id."},
				struct{ name, args, summary string }{"serve", "-redis URL [-spec lockgen.yaml] [-addr 127.0.0.1:8080] [-read-only] [-token-file FILE]", "Serve the live state as a web dashboard, with /metrics for Prometheus."})
		}
		rest = append(rest, cmd)
	}
	commands = rest
	moreCommands = map[string]func(*cli, []string) int{"inspect": (*cli).inspect, "serve": (*cli).serve}
}

// stdin is where inspect reads confirmations; tests replace it.
var stdin io.Reader = os.Stdin

// redisFlag declares -redis, documenting the URL forms.
func redisFlag(fs *flag.FlagSet) *string {
	return fs.String("redis", "redis://127.0.0.1:6379", "the Redis `URL`: redis://host:port[/db] (one node; rediss:// for TLS),\n"+
		"redis-sentinel://host:port[,host:port...]/master[/db] (Sentinel),\n"+
		"redis-cluster://host:port[,host:port...] (Cluster)")
}

// connect dials Redis and loads the spec, printing problems to stderr.
func (c *cli) connect(specPath, url string, opts inspect.Options) (*inspect.Inspector, redis.UniversalClient, bool) {
	rdb, err := inspect.Dial(url)
	if err != nil {
		fmt.Fprintf(c.stderr, "lockgen: %s\n", strings.TrimPrefix(err.Error(), "inspect: "))
		return nil, nil, false
	}
	in, err := inspect.Load(rdb, specPath, opts)
	if err != nil {
		rdb.Close()
		c.printSpecError(err)
		return nil, nil, false
	}
	return in, rdb, true
}

func (c *cli) printSpecError(err error) {
	var diags spec.Diagnostics
	if errors.As(err, &diags) {
		for _, d := range diags {
			fmt.Fprintln(c.stderr, d.String())
		}
		return
	}
	fmt.Fprintf(c.stderr, "lockgen: %v\n", err)
}

func (c *cli) inspect(args []string) int {
	fs, usage := c.flags("inspect")
	specPath := specFlag(fs)
	url := redisFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON for scripts instead of tables")
	yes := fs.Bool("yes", false, "perform the action without asking")
	forceUnlock := fs.Bool("force-unlock", false, "action: delete the lock's holds, whoever holds it, and wake its waiters")
	redrive := fs.Int("redrive", -1, "action: put up to `n` dead letters back on the queue (0: all)")
	purge := fs.Bool("purge", false, "action: delete every item of the queue: ready, delayed, in flight, dead")
	setPermits := fs.Int("set-permits", -1, "action: set the semaphore's capacity to `n` (0: back to the spec's)")
	item := fs.String("item", "", "show the queue's item with this `id`: where it is, its counters and body")
	remove := fs.String("remove", "", "action: remove the queue's item with this `id` (ready, delayed or dead; not in flight)")
	redriveID := fs.String("redrive-id", "", "action: put the queue's dead letter with this `id` back on the queue")
	runNow := fs.String("run-now", "", "action: make the queue's delayed item with this `id` ready now")
	bury := fs.String("bury", "", "action: move the queue's ready or delayed item with this `id` to the dead letters")
	reason := fs.String("reason", "", "the dead letter's reason with -bury (default \""+inspect.DefaultBuryReason+"\")")
	pause := fs.Bool("pause", false, "action: pause the queue's consumers (producers keep offering), or the schedule on every replica (its ticks are skipped)")
	resume := fs.Bool("resume", false, "action: resume the queue's consumers, or the paused schedule")
	maxScan := fs.Int("max-scan", 0, "keys SCAN may visit per node (default 100000)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	if code, ok := c.parse(fs, args, usage); !ok {
		return code
	}
	if f, fixed := flagAfterObject(fs); f != "" {
		// The flag package stops at the first argument that is not a
		// flag: a flag after the object would be read as a param.
		fmt.Fprintf(c.stderr, "lockgen inspect: %s comes after the object: flags go before the object (lockgen inspect [flags] %s)\n\n", f, strings.Join(fixed, " "))
		usage(c.stderr)
		return exitUsage
	}
	actions := 0
	itemAction, itemID := "", ""
	for _, f := range []struct {
		on     bool
		action string
		id     string
	}{
		{*forceUnlock, "", ""}, {*redrive >= 0, "", ""}, {*purge, "", ""}, {*setPermits >= 0, "", ""},
		{*pause, "", ""}, {*resume, "", ""}, {*bury != "", inspect.ActionBury, *bury},
		{*item != "", "show", *item}, {*remove != "", inspect.ActionRemove, *remove},
		{*redriveID != "", inspect.ActionRedrive, *redriveID}, {*runNow != "", inspect.ActionRunNow, *runNow},
	} {
		if f.on {
			actions++
			if f.action != "" {
				itemAction, itemID = f.action, f.id
			}
		}
	}
	if actions > 1 || actions == 1 && fs.NArg() == 0 {
		fmt.Fprintf(c.stderr, "lockgen inspect: an action needs one object instance (Object params...), and one action at a time\n\n")
		usage(c.stderr)
		return exitUsage
	}
	in, rdb, ok := c.connect(*specPath, *url, inspect.Options{MaxScan: *maxScan})
	if !ok {
		return exitFail
	}
	defer rdb.Close()
	defer in.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()

	var err error
	switch {
	case itemAction == "show":
		return c.showItem(ctx, in, itemID, fs.Args(), *asJSON)
	case itemAction != "":
		return c.actOnItem(ctx, in, itemAction, itemID, *reason, fs.Args(), *yes, *asJSON)
	case *pause || *resume:
		return c.pause(ctx, in, fs.Args(), *pause)
	case actions == 1:
		return c.act(ctx, in, fs.Args(), *yes, *forceUnlock, *redrive, *purge, *setPermits)
	case fs.NArg() == 0:
		var snap *inspect.Snapshot
		if snap, err = in.Snapshot(ctx); err == nil {
			var insts []*inspect.Instance
			for _, o := range snap.Objects {
				insts = append(insts, o.Instances...)
			}
			g := inspect.NewGraph(insts)
			if *asJSON {
				for _, o := range snap.Objects {
					o.Instances = nil // the summary; name an object for its instances
				}
				err = c.printJSON(struct {
					*inspect.Snapshot
					Graph *inspect.Graph `json:"waitFor"`
				}{snap, g})
			} else {
				inspect.WriteSummary(c.stdout, snap, g)
			}
		}
	case fs.NArg() == 1:
		var l *inspect.Listing
		if l, err = in.Instances(ctx, fs.Arg(0)); err == nil {
			switch {
			case *asJSON:
				err = c.printJSON(l)
			case len(l.Object.Params) == 0 && len(l.Instances) == 1:
				// Its one instance, in detail: there are no params to
				// name it by.
				inspect.WriteInstance(c.stdout, l.Instances[0])
			default:
				inspect.WriteListing(c.stdout, l)
			}
		}
	default:
		var inst *inspect.Instance
		if inst, err = in.Instance(ctx, fs.Arg(0), fs.Args()[1:]...); err == nil {
			if *asJSON {
				err = c.printJSON(inst)
			} else {
				inspect.WriteInstance(c.stdout, inst)
			}
		}
	}
	return c.result(err)
}

// flagAfterObject finds the first of fs's arguments after the flags that
// names one of its flags ("-force-unlock", "--yes", "-redrive=2"; a
// negative number is a param value, not a flag). It returns that flag and
// the arguments reordered with every such flag (and the value of one
// that takes it apart, "-redrive 2") before the others, or "" and nil.
func flagAfterObject(fs *flag.FlagSet) (string, []string) {
	var first string
	var flags, rest []string
	args := fs.Args()
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, ok := strings.CutPrefix(a, "-")
		name = strings.TrimPrefix(name, "-")
		name, _, hasValue := strings.Cut(name, "=")
		f := fs.Lookup(name)
		if !ok || f == nil && name != "h" && name != "help" {
			rest = append(rest, a)
			continue
		}
		if first == "" {
			first = a
		}
		flags = append(flags, a)
		if f != nil && !hasValue && i+1 < len(args) {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
				i++
				flags = append(flags, args[i])
			}
		}
	}
	if first == "" {
		return "", nil
	}
	return first, append(flags, rest...)
}

// result prints err, if any, and returns the exit code it makes. The
// inspect package's "inspect: " prefix is dropped: "lockgen inspect: "
// says it already.
func (c *cli) result(err error) int {
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(c.stderr, "lockgen inspect: %s\n", strings.TrimPrefix(err.Error(), "inspect: "))
	if errors.Is(err, inspect.ErrUnknownObject) || errors.Is(err, inspect.ErrBadParams) || errors.Is(err, inspect.ErrUnsupported) {
		return exitUsage
	}
	return exitFail
}

// act performs one action on one instance, after showing it and asking.
func (c *cli) act(ctx context.Context, in *inspect.Inspector, args []string, yes, forceUnlock bool, redrive int, purge bool, setPermits int) int {
	inst, err := in.Instance(ctx, args[0], args[1:]...)
	if err != nil {
		return c.result(err)
	}
	var what string
	switch {
	case forceUnlock:
		what = "force-unlock " + inst.Key
	case redrive >= 0:
		what = fmt.Sprintf("redrive %s dead letters of %s", countOrAll(redrive), inst.Key)
	case purge:
		what = "purge every item of " + inst.Key
	default:
		what = fmt.Sprintf("set the permits of %s to %d", inst.Key, setPermits)
		if setPermits == 0 {
			what = "reset the permits of " + inst.Key + " to the spec's"
		}
	}
	inspect.WriteInstance(c.stdout, inst)
	if !yes && !c.confirm(what) {
		fmt.Fprintln(c.stderr, "lockgen inspect: not confirmed; nothing changed")
		return exitFail
	}
	switch {
	case forceUnlock:
		var held bool
		if held, err = in.ForceUnlock(ctx, args[0], args[1:]...); err == nil {
			fmt.Fprintf(c.stdout, "force-unlocked %s (was held: %v)\n", inst.Key, held)
		}
	case redrive >= 0:
		var n int
		if n, err = in.Redrive(ctx, redrive, args[0], args[1:]...); err == nil {
			fmt.Fprintf(c.stdout, "redrove %d dead letters of %s\n", n, inst.Key)
		}
	case purge:
		var did bool
		if did, err = in.Purge(ctx, args[0], args[1:]...); err == nil {
			fmt.Fprintf(c.stdout, "purged %s (had items: %v)\n", inst.Key, did)
		}
	default:
		if err = in.SetPermits(ctx, setPermits, args[0], args[1:]...); err == nil {
			fmt.Fprintf(c.stdout, "%s: done\n", what)
		}
	}
	return c.result(err)
}

// pause pauses (or resumes) the consumers of one queue instance: not
// asked first, as it loses nothing and the other undoes it.
func (c *cli) pause(ctx context.Context, in *inspect.Inspector, args []string, pause bool) int {
	for _, o := range in.Objects() {
		if o.Name == args[0] && o.Kind == inspect.KindSchedule {
			return c.setPaused(ctx, in, args, pause)
		}
	}
	key, err := in.Key(args[0], args[1:]...)
	if err != nil {
		return c.result(err)
	}
	if pause {
		if err = in.Pause(ctx, args[0], args[1:]...); err == nil {
			fmt.Fprintf(c.stdout, "paused the consumers of %s (producers keep offering; -resume undoes it)\n", key)
		}
	} else if err = in.Resume(ctx, args[0], args[1:]...); err == nil {
		fmt.Fprintf(c.stdout, "resumed the consumers of %s\n", key)
	}
	return c.result(err)
}

func countOrAll(n int) string {
	if n == 0 {
		return "all"
	}
	return fmt.Sprint(n)
}

// confirm asks on stderr and reads y or yes from stdin.
func (c *cli) confirm(what string) bool {
	fmt.Fprintf(c.stderr, "%s? [y/N] ", what)
	line, _ := bufio.NewReader(stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// showItem prints the queue item id of one instance; no item with the id
// is a failure (exit 1) with a message that says so.
func (c *cli) showItem(ctx context.Context, in *inspect.Inspector, id string, args []string, asJSON bool) int {
	key, err := in.Key(args[0], args[1:]...)
	if err != nil {
		return c.result(err)
	}
	it, err := in.Item(ctx, id, args[0], args[1:]...)
	if err != nil {
		return c.result(err)
	}
	if asJSON {
		if err := c.printJSON(it); err != nil {
			return c.result(err)
		}
	} else if it.State != "" {
		inspect.WriteItem(c.stdout, key, it)
	}
	if it.State == "" {
		fmt.Fprintf(c.stderr, "lockgen inspect: no item %s in %s (removed or acknowledged already, or never there)\n", id, key)
		return exitFail
	}
	return exitOK
}

// actOnItem removes, redrives or runs now the queue item id of one
// instance, after showing it and asking. A second run finds the item gone
// (or ready already) and says so: exit 0, nothing changed. An item the
// action does not apply to (a remove of one in flight) exits 1.
func (c *cli) actOnItem(ctx context.Context, in *inspect.Inspector, action, id, reason string, args []string, yes, asJSON bool) int {
	key, err := in.Key(args[0], args[1:]...)
	if err != nil {
		return c.result(err)
	}
	it, err := in.Item(ctx, id, args[0], args[1:]...)
	if err != nil {
		return c.result(err)
	}
	// With -json, stdout holds the result alone.
	shown := c.stdout
	if asJSON {
		shown = c.stderr
	}
	inspect.WriteItem(shown, key, it)
	// Asked only when the action would change the item; else it runs and
	// says why it changed nothing.
	if inspect.Applies(action, it.State) && !yes {
		what := map[string]string{
			inspect.ActionRemove:  "remove item %s of %s",
			inspect.ActionRedrive: "redrive item %s of %s",
			inspect.ActionRunNow:  "make item %s of %s ready now",
			inspect.ActionBury:    "move item %s of %s to the dead letters",
		}[action]
		if !c.confirm(fmt.Sprintf(what, id, key)) {
			fmt.Fprintln(c.stderr, "lockgen inspect: not confirmed; nothing changed")
			return exitFail
		}
	}
	// Run also when the read found no item: the action's own answer is
	// the one that counts (and it changes nothing then).
	var r inspect.ItemResult
	switch action {
	case inspect.ActionRemove:
		r, err = in.RemoveItem(ctx, id, args[0], args[1:]...)
	case inspect.ActionRedrive:
		r, err = in.RedriveItem(ctx, id, args[0], args[1:]...)
	case inspect.ActionBury:
		r, err = in.BuryItem(ctx, id, reason, args[0], args[1:]...)
	default:
		r, err = in.RunItemNow(ctx, id, args[0], args[1:]...)
	}
	if err != nil {
		return c.result(err)
	}
	if asJSON {
		if err := c.printJSON(r); err != nil {
			return c.result(err)
		}
	} else if !r.Refused() {
		fmt.Fprintln(c.stdout, r)
	}
	if r.Refused() {
		fmt.Fprintf(c.stderr, "lockgen inspect: %s\n", r)
		return exitFail
	}
	return exitOK
}
