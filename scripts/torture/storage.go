package main

// storage is the harness's stand-in for the resource the locks protect:
// every write of every holder reaches it, in one order (the harness reads
// the workers' pipes and applies writes under one mutex).
//
// For the mutex it accepts everything and marks a write "late" when a
// hold that was acquired later has written already: a stale holder's
// write that a plain lock cannot stop (it checked its lease in time and
// was then delayed, e.g. stopped between the check and the write).
//
// For the fenced lock it is what fencing asks of a storage: it remembers
// the largest token that wrote and refuses ("rejected") a write with a
// smaller one.
type storage struct {
	newest   map[string]int64 // obj -> largest acquire time of a hold that wrote
	maxToken int64            // fenced: the largest token that wrote
}

func newStorage() *storage { return &storage{newest: map[string]int64{}} }

// Verdicts.
const (
	resOK       = "ok"
	resLate     = "late"     // accepted, but a later hold had written already
	resRejected = "rejected" // fenced: the token is below one that wrote
)

func (s *storage) apply(e Event) string {
	late := e.TAcq < s.newest[e.Obj]
	if e.Obj == objFenced {
		if e.Token < s.maxToken {
			return resRejected
		}
		s.maxToken = e.Token
	}
	if late {
		return resLate
	}
	s.newest[e.Obj] = e.TAcq
	return resOK
}
