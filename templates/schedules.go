package templates

// The schedule script takes the schedule's state hash and, for a schedule
// that targets a queue, three of the queue's keys (its header names them):
// a schedule with a queue target keeps its state under the queue's hash
// tag, so that claiming a tick and offering its item are one script on
// one slot.

// ScheduleSet names the scripts of schedules.
type ScheduleSet struct {
	Fire string
}

// Names returns the set's script names in a fixed order.
func (s ScheduleSet) Names() []string { return []string{s.Fire} }

// Schedule names the scripts of schedules.
var Schedule = ScheduleSet{Fire: "schedule_fire"}
