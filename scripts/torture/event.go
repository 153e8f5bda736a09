package main

// Event is one line of the harness's log (JSON lines). Workers write
// theirs to their stdout; the harness adds its own (faults, offers,
// worker starts and exits) and stamps each line's arrival (Recv). Every
// time is mono(): nanoseconds of one clock shared by all processes.
type Event struct {
	T    int64  `json:"t"`              // when it happened, stamped by its process
	Recv int64  `json:"recv,omitempty"` // when the harness read it
	W    string `json:"w,omitempty"`    // worker: "w<index>.<incarnation>"
	Ev   string `json:"ev"`             // see the constants below
	Obj  string `json:"obj,omitempty"`  // mutex | fenced | permits | jobs

	Hold  string `json:"hold,omitempty"`  // one acquisition: "<worker>/<obj>/<seq>"
	Token int64  `json:"token,omitempty"` // fencing token
	TAcq  int64  `json:"tacq,omitempty"`  // a write's hold's acquire time
	TCall int64  `json:"tcall,omitempty"` // acq, offer, take, ack: when the call was made
	Alive bool   `json:"alive,omitempty"` // rel: Err()==nil just before Unlock
	Msg   string `json:"msg,omitempty"`   // queue message: the payload, unique per offer
	Item  string `json:"item,omitempty"`  // queue item id in Redis (Delivery.ID)
	Att   int    `json:"att,omitempty"`   // delivery attempt
	Err   string `json:"err,omitempty"`
	Req   int64  `json:"req,omitempty"` // storage request id (write)
	Res   string `json:"res,omitempty"` // storage verdict: ok | late | rejected

	// Read straight from Redis by a worker (evHolds, evCountDown).
	Stage string `json:"stage,omitempty"` // holds: lock | reenter | inner | prerel | after | permit
	N     int    `json:"n,omitempty"`     // holds: the hold count (mutex) or the caller's permits; countdown: the latch's count; -1: the read failed
	Extra int    `json:"extra,omitempty"` // permit: permits counted in all ('*') beyond the owners' own counts

	Fault  string `json:"fault,omitempty"`  // fault kind
	Target string `json:"target,omitempty"` // the worker a fault hit
	Pid    int    `json:"pid,omitempty"`
}

// Event kinds.
const (
	evAcq     = "acq"     // Lock/Acquire returned a hold (T: just after)
	evAcqErr  = "acqerr"  // Lock/Acquire failed
	evWrite   = "write"   // a write to the storage; T: when Err()==nil was checked
	evLost    = "lost"    // the hold's context ended before Unlock (Err: its cause)
	evRel     = "rel"     // about to Unlock/Release (Alive: Err()==nil at T)
	evUnlock  = "unlock"  // Unlock/Release returned (Err)
	evTake    = "take"    // a delivery arrived
	evAck     = "ack"     // Ack returned (Err)
	evOffer   = "offer"   // the harness offered Msg (Err: it may or may not have landed)
	evSpawn   = "spawn"   // a worker process started
	evExit    = "exit"    // a worker process ended
	evFault   = "fault"   // a fault began
	evHealed  = "healed"  // the fault ended (for instant faults: right after it began)
	evRestart = "restart" // redis-server came back (empty)
	// Double effects, read from Redis by the worker right after a call
	// (Alive: the hold's Err()==nil, checked after the read).
	evHolds     = "holds"     // Stage's count after that step (Err: the step's error)
	evCountDown = "countdown" // CountDown number Att of latch Hold returned (Err), then the count read was N
	// A tick of the schedule Tick, drained by the harness from its queue:
	// Msg is the tick (unix ms); T is the tick's time on mono's clock (the
	// harness's estimate), so that it falls in the window of its fault.
	evTick = "tick"
)

// The objects, by their name in the log.
const (
	objMutex   = "mutex"
	objFenced  = "fenced"
	objPermits = "permits"
	objJobs    = "jobs"
	objLatch   = "latch"
	objTicks   = "ticks"
)
