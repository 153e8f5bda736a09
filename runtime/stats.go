package runtime

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The history the dashboard charts: per namespace, one Redis hash per
// minute, its fields "<Object>:<counter>". See "Stats" in the package doc.

// StatsTTL is how long a minute of history stays in Redis after its last
// write: the hour the dashboard shows, and a margin.
const StatsTTL = 62 * time.Minute

// statsInterval is how often a client with stats flushes what it
// counted; statsJitter spreads the flushes of many clients.
const (
	statsInterval = time.Minute
	statsJitter   = 10 * time.Second
)

// StatsKey returns the key of one minute of a namespace's history (the
// minute t falls in): "<namespace>:stats:{<namespace>}:<unix minute>".
// Every minute of a namespace is in one hash slot, so the dashboard reads
// an hour in one pipeline; the key is outside the "<namespace>:{" keys of
// the objects, which inspect scans.
func StatsKey(namespace string, t time.Time) string {
	return namespace + ":stats:{" + namespace + "}:" + strconv.FormatInt(t.Unix()/60, 10)
}

// WithStats makes the client keep a per-minute history of what its
// objects do, for the dashboard's charts: every event an Observer would
// see (see EventKind) is counted per object and minute, as its N (one
// when N is 0), and when it has a Duration, the durations are summed, in
// microseconds, in "<kind>.us". Nothing is sent per operation: the counts
// are kept in memory and added to the minute's hash in namespace's
// history (StatsKey) by one pipeline per minute (HINCRBY per non-zero
// counter, and an EXPIRE of StatsTTL), and at Close. A flush that fails
// is tried again at the next one; counts older than StatsTTL are
// dropped.
//
// The counters of one client go under one namespace: give the spec's
// (lockgen.yaml's namespace:), which is what the dashboard reads. Off by
// default: it writes keys to Redis, which nothing in the runtime needs.
func WithStats(namespace string) Option {
	return func(c *Client) {
		if namespace != "" && c.stats == nil {
			c.stats = &statsRecorder{ns: namespace, stop: make(chan struct{}), done: make(chan struct{})}
			c.observers = append(c.observers, c.stats)
		}
	}
}

// statsRecorder counts a client's events per minute, object and kind.
type statsRecorder struct {
	ns string

	mu      sync.Mutex
	minutes map[int64]map[statField]int64 // unix minute -> counters
	last    int64                         // the minute of cur
	cur     map[statField]int64

	stop, done chan struct{}
	closeOnce  sync.Once

	every time.Duration // the flushes' interval, and the first's delay (tests; 0: a minute, from the next one)
}

// statField is a counter: an event kind's count, or (us) the sum of its
// durations.
type statField struct {
	object string
	kind   EventKind
	us     bool
}

func (f statField) name() string {
	s := f.object + ":" + string(f.kind)
	if f.us {
		s += ".us"
	}
	return s
}

// The recorder is one of the client's observers: it sees every event,
// and an operation's start and end cost it a call that returns a shared
// no-op.
func (s *statsRecorder) Start(ctx context.Context, _ Op) (context.Context, func(error)) {
	return ctx, noEnd
}

func noEnd(error) {}

// Event counts e: a map update under a mutex, no allocation once the
// minute's counter exists.
func (s *statsRecorder) Event(_ context.Context, e Event) {
	if e.Object == "" || e.Kind == EventScriptReloaded {
		return // not an object's (a script's name, a connection)
	}
	n := int64(e.N)
	if n <= 0 {
		n = 1
	}
	minute := time.Now().Unix() / 60
	s.mu.Lock()
	if s.cur == nil || minute != s.last {
		if s.minutes == nil {
			s.minutes = map[int64]map[statField]int64{}
		}
		s.cur = s.minutes[minute]
		if s.cur == nil {
			s.cur = map[statField]int64{}
			s.minutes[minute] = s.cur
		}
		s.last = minute
	}
	s.cur[statField{e.Object, e.Kind, false}] += n
	if e.Duration > 0 {
		s.cur[statField{e.Object, e.Kind, true}] += e.Duration.Microseconds()
	}
	s.mu.Unlock()
}

// take removes and returns what was counted.
func (s *statsRecorder) take() map[int64]map[statField]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.minutes
	s.minutes, s.cur = nil, nil
	return m
}

// giveBack puts counts a flush could not send back, adding them to what
// was counted since; minutes past StatsTTL are dropped.
func (s *statsRecorder) giveBack(m map[int64]map[statField]int64) {
	oldest := time.Now().Add(-StatsTTL).Unix() / 60
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.minutes == nil {
		s.minutes = map[int64]map[statField]int64{}
	}
	for minute, fields := range m {
		if minute < oldest {
			continue
		}
		cur := s.minutes[minute]
		if cur == nil {
			s.minutes[minute] = fields
			continue
		}
		for f, v := range fields {
			cur[f] += v
		}
	}
	s.cur = nil
}

// flush sends what was counted: one pipeline, one round trip (all the
// namespace's minutes are in one slot).
func (s *statsRecorder) flush(ctx context.Context, rdb redis.UniversalClient) error {
	m := s.take()
	if len(m) == 0 {
		return nil
	}
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for minute, fields := range m {
			key := StatsKey(s.ns, time.Unix(minute*60, 0))
			for f, v := range fields {
				if v != 0 {
					p.HIncrBy(ctx, key, f.name(), v)
				}
			}
			p.Expire(ctx, key, StatsTTL)
		}
		return nil
	})
	if err != nil {
		// HINCRBY is not idempotent: a pipeline whose reply was lost may
		// have been applied, and is then counted twice. A chart shows a
		// spike; nothing depends on it.
		s.giveBack(m)
	}
	return err
}

// run flushes every statsInterval, from a moment a little after the
// next minute starts (jittered, so clients do not flush together), until
// close.
func (s *statsRecorder) run(rdb redis.UniversalClient) {
	defer close(s.done)
	now := time.Now()
	first := now.Truncate(time.Minute).Add(time.Minute).Sub(now) + rand.N(statsJitter)
	every := statsInterval
	if s.every > 0 {
		first, every = s.every, s.every
	}
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = s.flush(ctx, rdb) // kept for the next one
			cancel()
			t.Reset(every)
		}
	}
}

// close stops the flushes and sends what is left, within a second.
func (s *statsRecorder) close(rdb redis.UniversalClient) {
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.done
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = s.flush(ctx, rdb)
	})
}

// FlushStats sends the counts WithStats kept since the last flush now,
// rather than at the next minute's (a test, or before a planned exit;
// Close does it too). It returns the pipeline's error (the counts are
// then kept for the next flush), and nil without WithStats.
func (c *Client) FlushStats(ctx context.Context) error {
	if c.stats == nil {
		return nil
	}
	return c.stats.flush(ctx, c.rdb)
}

// StatsMinute is one minute of a namespace's history: by object, its
// counters ("<kind>", "<kind>.us" from WithStats; "gauge.<name>" from
// the dashboard's samples).
type StatsMinute struct {
	Start   time.Time
	Objects map[string]map[string]int64
}

// ReadStats returns the minutes of namespace's history from from to to
// (the minutes they fall in, at most 24 hours of them), oldest first, a
// minute with nothing recorded with no objects. It reads them in one
// pipeline of HGETALL (one round trip: they share a slot).
func ReadStats(ctx context.Context, rdb redis.UniversalClient, namespace string, from, to time.Time) ([]StatsMinute, error) {
	first, last := from.Unix()/60, to.Unix()/60
	if last < first {
		return nil, nil
	}
	if last-first >= 24*60 {
		first = last - 24*60 + 1
	}
	cmds := make([]*redis.MapStringStringCmd, 0, last-first+1)
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for m := first; m <= last; m++ {
			cmds = append(cmds, p.HGetAll(ctx, StatsKey(namespace, time.Unix(m*60, 0))))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]StatsMinute, len(cmds))
	for i, cmd := range cmds {
		out[i] = StatsMinute{Start: time.Unix((first+int64(i))*60, 0), Objects: map[string]map[string]int64{}}
		for f, v := range cmd.Val() {
			object, counter, ok := strings.Cut(f, ":")
			n, err := strconv.ParseInt(v, 10, 64)
			if !ok || err != nil {
				continue
			}
			if out[i].Objects[object] == nil {
				out[i].Objects[object] = map[string]int64{}
			}
			out[i].Objects[object][counter] = n
		}
	}
	return out, nil
}

// WriteStatsGauges records samples of objects' states (a queue's depth by
// state, the locks held) in the minute at falls in of namespace's
// history, each as "gauge.<name>", replacing the minute's earlier sample:
// one HSET and one EXPIRE, pipelined. The dashboard calls it; gauges maps
// an object to its samples by name.
func WriteStatsGauges(ctx context.Context, rdb redis.UniversalClient, namespace string, at time.Time, gauges map[string]map[string]int64) error {
	var args []any
	for object, g := range gauges {
		for name, v := range g {
			args = append(args, object+":gauge."+name, v)
		}
	}
	if len(args) == 0 {
		return nil
	}
	key := StatsKey(namespace, at)
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, args...)
		p.Expire(ctx, key, StatsTTL)
		return nil
	})
	return err
}
