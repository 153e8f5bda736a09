package gen

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/lockgen/lockgen/internal/defs"
	"github.com/lockgen/lockgen/internal/spec"
	"github.com/lockgen/lockgen/runtime/lockimpl"
)

// scheduleReceiver is the receiver of the methods of Schedules.
const scheduleReceiver = "s"

// scheduleScriptsVar names the lockimpl.ScheduleScripts of the file.
const scheduleScriptsVar = "scheduleScripts"

// schedule is a schedule as generated.
type schedule struct {
	*spec.Schedule
	object
	target *queue // the target queue as generated, or nil for a handler
}

// schedulesSection generates the schedules: section.
type schedulesSection struct {
	schedules []*schedule // sorted by name
}

func init() { registerSection("schedules", func() section { return &schedulesSection{} }) }

// collect keeps the spec's schedules and finds their target queues.
func (sec *schedulesSection) collect(g *generator) {
	for _, ss := range g.spec.Schedules {
		s := &schedule{Schedule: ss, object: g.newObject(ss.Object, scheduleReceiver, "Schedule")}
		if ss.Target != nil {
			for _, q := range g.queuesOf().queues {
				if q.Queue == ss.Target {
					s.target = q
				}
			}
		}
		sec.schedules = append(sec.schedules, s)
	}
}

// params returns nothing: schedules have no params.
func (sec *schedulesSection) params() []*param { return nil }

// scripts returns the schedule scripts when there is a schedule.
func (sec *schedulesSection) scripts() []string {
	if len(sec.schedules) == 0 {
		return nil
	}
	return lockimpl.ScriptNames(lockimpl.Scripts().Schedules())
}

// fieldName is the field of Schedules holding s.
func (s *schedule) fieldName() string { return s.ident }

// typeExpr is *lockrt.Schedule, or *lockrt.QueueSchedule[Payload].
func (s *schedule) typeExpr() *jen.Statement {
	if s.target == nil {
		return jen.Op("*").Qual(runtimePath, "Schedule")
	}
	return jen.Op("*").Qual(runtimePath, "QueueSchedule").Types(s.target.payload())
}

// newCall builds s over client c: lockimpl.NewSchedule(c, &def,
// key.Key()), or for a queue target lockimpl.New[Reliable]QueueSchedule(c,
// &def, lockimpl.New[Reliable]Queue(c, &queueDef, codec, queueKey.Key())).
func (s *schedule) newCall(c jen.Code) *jen.Statement {
	if s.target == nil {
		return jen.Qual(implPath, "NewSchedule").Call(c, jen.Op("&").Id(s.defVar()), jen.Id(s.keyVar()).Dot("Key").Call())
	}
	q := s.target
	kind := "Queue"
	if q.Reliable != nil {
		kind = "ReliableQueue"
	}
	queue := jen.Qual(implPath, "New"+kind).Call(c, jen.Op("&").Id(q.defVar()), q.codec(), jen.Id(q.keyVar()).Dot("Key").Call())
	return jen.Qual(implPath, "New"+kind+"Schedule").Call(c, jen.Op("&").Id(s.defVar()), queue)
}

// render writes the Schedules type, its constructor, a method per
// schedule, and the definitions they use.
func (sec *schedulesSection) render(g *generator, f *jen.File) {
	if len(sec.schedules) == 0 {
		return
	}
	src := g.sourceName()
	client := jen.Op("*").Qual(runtimePath, "Client")
	var fields, values []jen.Code
	for _, s := range sec.schedules {
		fields = append(fields, jen.Id(s.fieldName()).Add(s.typeExpr()))
		values = append(values, field(s.fieldName(), s.newCall(jen.Id("c"))))
	}
	f.Add(comment("Schedules gives typed access to the schedules declared in " + src + ".\n" +
		"Start each on every replica: each tick fires on exactly one of them."))
	f.Type().Id("Schedules").Struct(fields...)
	f.Add(comment("NewSchedules returns the schedules of " + src + " over c. It does not contact Redis."))
	f.Func().Id("NewSchedules").Params(jen.Id("c").Add(client)).Op("*").Id("Schedules").Block(
		jen.Return(jen.Op("&").Id("Schedules").Custom(multiline, values...)),
	)
	for _, s := range sec.schedules {
		g.renderSchedule(f, s)
	}
	f.Add(comment(scheduleScriptsVar + " are the runtime's scripts of schedules."))
	f.Var().Id(scheduleScriptsVar).Op("=").Id(pinnedVar).Dot("Schedules").Call()
}

// scheduleDoc is the doc comment of a schedule's method.
func (g *generator) scheduleDoc(s *schedule) string {
	doc := docComment(s.Name, s.Description, s.Name+" returns the "+s.Name+" schedule.")
	var when string
	if s.Cron != "" {
		when = fmt.Sprintf("Schedule %q", s.Cron)
		if s.Timezone != "" {
			when += " in " + s.Timezone
		}
	} else {
		when = "Schedule every " + humanDuration(s.Every)
	}
	var more []string
	if s.Jitter > 0 {
		more = append(more, "jitter "+humanDuration(s.Jitter))
	}
	switch s.CatchUp {
	case spec.CatchUpLatest:
		more = append(more, "catching up on the newest missed tick")
	case spec.CatchUpAll:
		more = append(more, fmt.Sprintf("catching up on up to %d missed ticks", s.MaxCatchUp))
	default:
		more = append(more, "skipping missed ticks")
	}
	var target string
	if s.target != nil {
		target = fmt.Sprintf("each tick offers an item to %s (state at %s:schedule:%s)",
			s.target.Name, keyDoc(g.spec.Namespace, s.target.Object), s.Identity())
	} else {
		target = "each tick runs the handler given to Start (state at " + keyDoc(g.spec.Namespace, s.Object) + ")"
	}
	return doc + "\n\n" + when + ", " + strings.Join(more, ", ") + ";\n" + target + "."
}

// renderSchedule writes a schedule's method and its definitions.
func (g *generator) renderSchedule(f *jen.File, s *schedule) {
	f.Add(comment(g.scheduleDoc(s)))
	f.Func().Params(jen.Id(scheduleReceiver).Op("*").Id("Schedules")).Id(s.Name).Params().
		Add(s.typeExpr()).Block(jen.Return(jen.Id(scheduleReceiver).Dot(s.fieldName())))
	vars := []jen.Code{}
	if s.target == nil {
		vars = append(vars, jen.Id(s.keyVar()).Op("=").Add(keyDef(g.spec.Namespace, s.Object)))
	}
	vars = append(vars, jen.Id(s.defVar()).Op("=").Add(literal(defs.Schedule(s.Schedule), jen.Id(scheduleScriptsVar))))
	f.Var().Defs(vars...)
}
