package impl

import (
	"time"
)

// ScheduleScripts are the scripts of schedules. The schedule script takes
// the schedule's state hash and, for a schedule that targets a queue,
// three of the queue's keys (its header names them): a schedule with a
// queue target keeps its state under the queue's hash tag, so that
// claiming a tick and offering its item are one script on one slot.
type ScheduleScripts struct {
	Fire *Script
}

// CatchUp is what a schedule does with ticks nobody fired in time (no
// replica ran, Redis was down).
type CatchUp int

// The catch-up policies, as a spec writes them: none, latest, all.
const (
	CatchUpNone CatchUp = iota
	CatchUpLatest
	CatchUpAll
)

func (c CatchUp) String() string {
	switch c {
	case CatchUpLatest:
		return "latest"
	case CatchUpAll:
		return "all"
	}
	return "none"
}

// ScheduleDef is the static definition of a schedule declared in a spec.
type ScheduleDef struct {
	Name string // the spec's name, for errors
	// ID is the schedule's key identity (the spec's id, or else its
	// name): a schedule with a queue target keeps its state at
	// <queue key>:schedule:<ID>.
	ID string
	// Cron is the cron expression (5 fields, or a descriptor such as
	// @daily or @every 30s), or "" when Every is set.
	Cron     string
	Every    time.Duration // the period of an every: schedule
	Timezone string        // the IANA time zone of a cron schedule; "" is UTC
	Jitter   time.Duration // the largest delay of a tick's fire
	CatchUp  CatchUp
	// MaxCatchUp bounds the missed ticks CatchUpAll fires (the newest).
	MaxCatchUp int
	Scripts    *ScheduleScripts
}

// NewSchedule makes the schedule of def with its state at key, whose
// fires run a handler (runtime.Client's).
var NewSchedule func(c any, def *ScheduleDef, key string) any

// SetUpQueueSchedule makes s (a new *runtime.QueueSchedule[T]) the
// schedule of def over c whose fires offer an item to q (the target
// queue: a *runtime.Queue[T] or *runtime.ReliableQueue[T]).
var SetUpQueueSchedule func(s, c any, def *ScheduleDef, q any)

// Schedules returns the scripts of schedules.
func (p *Pinned) Schedules() *ScheduleScripts {
	return &ScheduleScripts{Fire: p.get("schedule_fire")}
}
