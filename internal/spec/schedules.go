package spec

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// This file is the schedules: section: its row of the kind table, its
// objects' type and the parse function that reads them.

func init() {
	register(&Kind{
		Order:   6,
		Section: "schedules", Noun: "schedule",
		Example: `Nightly: { cron: "0 3 * * *", timezone: Europe/Paris }`,
		Fields: keylessFieldsOf(Field{"cron", Behaviour}, Field{"every", Behaviour}, Field{"timezone", Behaviour},
			Field{"jitter", Behaviour}, Field{"catchUp", Behaviour}, Field{"maxCatchUp", Behaviour}, Field{"queue", Breaking}),
		Keyless:    true,
		Moved:      "old and new replicas both fire each tick",
		SpecField:  "Schedules",
		parse:      parseSchedule,
		Doc:        "A schedule: ticks by cron or period, each fired exactly once across every replica, claimed in Redis by the server's clock. Its target is a queue of the same spec (an item built per tick) or a handler the program registers.",
		SectionDoc: "Schedules by exported Go name.",
		FieldSchemas: map[string]string{
			"cron":       `{"type": "string", "minLength": 1, "description": "When it fires: a standard cron expression of 5 fields (minute hour day-of-month month day-of-week), or a descriptor such as @daily, @hourly or @every 30s. Write cron or every, not both."}`,
			"every":      `{"$ref": "#/$defs/duration", "description": "When it fires: every period, at the multiples of the period since the Unix epoch (UTC). Write cron or every, not both."}`,
			"timezone":   `{"type": "string", "minLength": 1, "description": "The IANA time zone of a cron expression, e.g. Europe/Paris. Default UTC. Not for every."}`,
			"jitter":     `{"$ref": "#/$defs/duration", "description": "Delays each tick's fire by up to this much, the same on every replica (it spreads schedules that share a tick). Less than the period. Default none."}`,
			"catchUp":    `{"enum": ["none", "latest", "all"], "default": "none", "description": "What to do with ticks nobody fired in time (no replica ran, Redis was down): none skips them (a tick later than half its period, at most a minute, is missed), latest fires the newest, all fires each, oldest first, at most maxCatchUp. Default none."}`,
			"maxCatchUp": `{"$ref": "#/$defs/count", "default": 100, "description": "With catchUp all: how many missed ticks it fires at most (the newest). Default 100."}`,
			"queue":      `{"$ref": "#/$defs/objectName", "description": "The target: a queue of this spec without params, to which each tick offers an item that the program builds per tick, in the same step as the claim. Without it the program registers a handler."}`,
		},
		Rules: `"oneOf": [{"required": ["cron"]}, {"required": ["every"]}]`,
	})
}

// Schedule catch-up policies: what a schedule does with ticks nobody
// fired in time (no replica ran, Redis was down).
const (
	CatchUpNone   = "none"   // skip them
	CatchUpLatest = "latest" // fire the newest of them
	CatchUpAll    = "all"    // fire each, oldest first, at most maxCatchUp (the newest)
)

// CatchUps lists the catch-up policies, in the order the docs give them.
var CatchUps = []string{CatchUpNone, CatchUpLatest, CatchUpAll}

// DefaultMaxCatchUp bounds catchUp: all when the spec gives no maxCatchUp.
const DefaultMaxCatchUp = 100

// Schedule is an entry of schedules:. It has no key pattern nor params:
// its state is one hash, namespace:{Name:}, or, when it targets a queue,
// under the queue's hash tag (<queue key>:schedule:<Name>), so that
// claiming a tick and offering its item are one script on one slot.
type Schedule struct {
	Object
	Cron       string        `spec:"cron"`  // a cron expression or descriptor; "" when Every is set
	Every      time.Duration `spec:"every"` // the period; 0 when Cron is set
	Timezone   string        `spec:"timezone"`
	Jitter     time.Duration `spec:"jitter"`
	CatchUp    string        `spec:"catchUp"`
	MaxCatchUp int           `spec:"maxCatchUp"` // catchUp all only
	// Queue names the target queue of the same spec, or "" for a
	// handler the program registers.
	Queue    string `spec:"queue"`
	QueuePos Pos
	// Target is the queue Queue names, once resolved.
	Target *Queue
}

func parseSchedule(p *parser, s *Spec, k *Kind, e entry) {
	o, f, ok := p.object(k, e)
	if !ok {
		return
	}
	sc := &Schedule{Object: o, CatchUp: CatchUpNone}
	var period time.Duration // the shortest time between two ticks, when known
	expr, cronNode, hasCron := f.str("cron")
	every, hasEvery := f.duration("every", false)
	switch {
	case hasCron && f.has("every"):
		p.errorf(cronNode, "keep one of them", "%s: write cron or every, not both", f.what)
	case hasCron:
		c, err := cron.ParseStandard(expr)
		if err != nil {
			p.errorf(cronNode, `5 fields (minute hour day-of-month month day-of-week), e.g. "0 3 * * *", or a descriptor: @daily, @hourly, @every 30s`,
				"%s: cron %q does not parse: %v", f.what, expr, err)
			break
		}
		if d, ok := c.(cron.ConstantDelaySchedule); ok {
			// robfig/cron rounds @every down to whole seconds, at least 1s.
			if want, err := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(expr, "@every"))); err == nil && want != d.Delay {
				p.errorf(cronNode, fmt.Sprintf("write every: %s, which keeps it", DurationString(want)),
					"%s: cron %q would tick every %s (cron descriptors count whole seconds)", f.what, expr, DurationString(d.Delay))
				break
			}
			period = d.Delay
		} else {
			period = shortestGap(c)
		}
		sc.Cron = expr
	case hasEvery:
		sc.Every, period = every, every
	case !f.has("every") && !f.has("cron"):
		f.missing("cron", `when it fires: cron: "0 3 * * *" (or @every 30s, @daily), or every: 1m`)
	}
	if v, n, ok := f.str("timezone"); ok {
		switch _, err := time.LoadLocation(v); {
		case sc.Cron == "" && hasEvery:
			p.errorf(n, "every: ticks are the multiples of the period since the Unix epoch; use cron for wall-clock times", "%s: timezone is for cron schedules", f.what)
		case err != nil || v == "Local" || v == "":
			p.errorf(n, "an IANA time zone name, e.g. Europe/Paris or America/New_York", "%s: unknown time zone %q", f.what, v)
		default:
			sc.Timezone = v
		}
	}
	if v, ok := f.duration("jitter", true); ok {
		if period > 0 && v >= period {
			p.errorf(f.m["jitter"].at, fmt.Sprintf("less than the period, %s", DurationString(period)), "%s: jitter %s would push a tick past the next", f.what, DurationString(v))
		} else {
			sc.Jitter = v
		}
	}
	if v, _, ok := f.oneOf("catchUp", CatchUps); ok {
		sc.CatchUp = v
	}
	if sc.CatchUp == CatchUpAll {
		sc.MaxCatchUp = DefaultMaxCatchUp
	}
	if v, ok := f.integer("maxCatchUp", 1); ok {
		if sc.CatchUp != CatchUpAll {
			p.errorf(f.m["maxCatchUp"].at, "write catchUp: all, or remove maxCatchUp", "%s: maxCatchUp bounds catchUp all, not %s", f.what, sc.CatchUp)
		} else {
			sc.MaxCatchUp = v
		}
	}
	if v, n, ok := f.str("queue"); ok {
		sc.Queue, sc.QueuePos = v, p.pos(n)
	}
	k.append(s, sc)
}

// shortestGap returns the shortest time between two ticks of c over a
// year from 2026 (in UTC; it bounds jitter, so a close answer will do).
func shortestGap(c cron.Schedule) time.Duration {
	t := c.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	end := t.AddDate(1, 0, 0)
	best := time.Duration(0)
	for i := 0; i < 100000 && t.Before(end); i++ {
		n := c.Next(t)
		if d := n.Sub(t); best == 0 || d < best {
			best = d
		}
		if best <= time.Minute {
			break // a 5-field expression's shortest gap
		}
		t = n
	}
	return best
}

// checkScheduleTargets resolves each schedule's queue: a queue of the
// same spec, without params (a schedule offers to one queue).
func (p *parser) checkScheduleTargets(s *Spec) {
	var names []string
	for _, q := range s.Queues {
		names = append(names, q.Name)
	}
	for _, sc := range s.Schedules {
		if sc.Queue == "" {
			continue
		}
		what := "schedule " + sc.Name
		var target *Queue
		for _, q := range s.Queues {
			if q.Name == sc.Queue {
				target = q
			}
		}
		switch {
		case target == nil:
			hint := "name a queue of this spec, or remove queue: to register a handler"
			if g := suggest(sc.Queue, names); g != "" {
				hint = fmt.Sprintf("did you mean %q?", g)
			} else if len(names) > 0 {
				hint = "the queues are " + strings.Join(names, ", ")
			}
			p.errorAt(sc.QueuePos, hint, "%s: queue %s is not declared", what, sc.Queue)
		case len(target.Key.Params) > 0:
			p.errorAt(sc.QueuePos, "a schedule offers to one queue: declare a queue without params for it",
				"%s: queue %s has params", what, sc.Queue)
		default:
			sc.Target = target
		}
	}
}
