package main

import (
	"context"
	"slices"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// fault is one kind of fault the harness injects. inject records a fault
// event when the fault begins and a healed event when it ends, and
// returns then.
type fault struct {
	about string
	// unsafe: with Redis as configured here (no persistence), this fault
	// may legitimately break mutual exclusion, fencing order or queue
	// durability; the checker reports what happens in its window apart.
	unsafe bool
	// continuous: it lasts, but stops nobody (no outage, pause or delay):
	// a stall after Unlock during it is not explained by it.
	continuous bool
	inject     func(ctx context.Context, h *harness) error
}

// pauseFor is how long a stopped, paused or partitioned party stays so:
// past the lease, so that the others can take over.
const pauseFor = lease + time.Second

var faultKinds = map[string]fault{
	"sigstop-holder": {about: "SIGSTOP the mutex holder mid-hold for lease+1s, then SIGCONT", inject: func(ctx context.Context, h *harness) error {
		p := h.onNext(ctx, evWrite, objMutex, func(p *proc) {
			h.begin("sigstop-holder", p.id)
			p.cmd.Process.Signal(syscall.SIGSTOP)
		})
		sleep(ctx, pauseFor)
		p.cmd.Process.Signal(syscall.SIGCONT)
		h.healed("sigstop-holder")
		return nil
	}},
	"kill-holder": {about: "kill -9 the mutex holder mid-hold, start it again", inject: func(ctx context.Context, h *harness) error {
		p := h.onNext(ctx, evWrite, objMutex, func(p *proc) {
			h.begin("kill-holder", p.id)
			p.cmd.Process.Signal(syscall.SIGKILL)
		})
		h.killAndRestart(p)
		h.healed("kill-holder")
		return nil
	}},
	"kill-consumer": {about: "kill -9 a worker that just took a delivery, start it again", inject: func(ctx context.Context, h *harness) error {
		p := h.onNext(ctx, evTake, objJobs, func(p *proc) {
			h.begin("kill-consumer", p.id)
			p.cmd.Process.Signal(syscall.SIGKILL)
		})
		h.killAndRestart(p)
		h.healed("kill-consumer")
		return nil
	}},
	"redis-restart": {unsafe: true, about: "kill -9 redis-server, restart it empty after 2s", inject: func(ctx context.Context, h *harness) error {
		nodes := h.redisNodes()
		h.begin("redis-restart", "")
		for _, n := range nodes {
			n.Kill()
		}
		sleep(ctx, 2*time.Second)
		var err error
		for _, n := range nodes {
			if rerr := n.Restart(); rerr != nil {
				err = rerr
			}
		}
		h.healed("redis-restart")
		return err
	}},
	"client-pause": {about: "CLIENT PAUSE ALL for lease+1s", inject: func(ctx context.Context, h *harness) error {
		h.begin("client-pause", "")
		err := h.adminDo(ctx, "client", "pause", pauseFor.Milliseconds(), "all")
		sleep(ctx, pauseFor)
		h.healed("client-pause")
		return err
	}},
	"client-kill-normal": {about: "CLIENT KILL TYPE normal (every command connection)", inject: func(ctx context.Context, h *harness) error {
		h.begin("client-kill-normal", "")
		err := h.adminDo(ctx, "client", "kill", "type", "normal")
		h.healed("client-kill-normal")
		return err
	}},
	"client-kill-pubsub": {about: "CLIENT KILL TYPE pubsub (every subscriber connection)", inject: func(ctx context.Context, h *harness) error {
		h.begin("client-kill-pubsub", "")
		err := h.adminDo(ctx, "client", "kill", "type", "pubsub")
		h.healed("client-kill-pubsub")
		return err
	}},
	"proxy-cut": {about: "the proxy closes every worker connection", inject: func(ctx context.Context, h *harness) error {
		if len(h.proxies) == 0 {
			return errNoTarget
		}
		h.begin("proxy-cut", "")
		for _, p := range h.proxies {
			p.Cut()
		}
		h.healed("proxy-cut")
		return nil
	}},
	"lose-reply": {about: "every worker's proxy lets one request through to Redis, reads its reply and cuts the client's connection instead of forwarding it: go-redis runs it again", inject: func(ctx context.Context, h *harness) error {
		if len(h.proxies) == 0 {
			return errNoTarget
		}
		h.begin("lose-reply", "")
		for _, p := range h.proxies {
			p.LoseReply()
		}
		h.healed("lose-reply")
		return nil
	}},
	"lose-replies": {continuous: true, about: "every worker's proxy loses the reply of a fraction (-lose-reply) of EVAL/EVALSHA requests after Redis ran them, for a while: go-redis retries each", inject: func(ctx context.Context, h *harness) error {
		if len(h.proxies) == 0 {
			return errNoTarget
		}
		h.begin("lose-replies", "")
		for _, p := range h.proxies {
			p.SetLoseRate(h.cfg.LoseRate)
		}
		sleep(ctx, h.cfg.LoseFor)
		for _, p := range h.proxies {
			p.SetLoseRate(0)
		}
		h.healed("lose-replies")
		return nil
	}},
	"proxy-delay": {about: "the proxy delays every chunk by 100ms, both ways, for 3s", inject: func(ctx context.Context, h *harness) error {
		if len(h.proxies) == 0 {
			return errNoTarget
		}
		h.begin("proxy-delay", "")
		for _, p := range h.proxies {
			p.SetDelay(100 * time.Millisecond)
		}
		sleep(ctx, 3*time.Second)
		for _, p := range h.proxies {
			p.SetDelay(0)
		}
		h.healed("proxy-delay")
		return nil
	}},
	"partition-holder": {about: "the mutex holder's proxy holds back every byte for lease+1s, then cuts; the holder works on meanwhile", inject: func(ctx context.Context, h *harness) error {
		if len(h.proxies) == 0 {
			return errNoTarget
		}
		// The storage answers the holder's write only when the partition
		// heals: a holder working past its lease, cut off from Redis.
		h.onNext(ctx, evWrite, objMutex, func(p *proc) {
			h.begin("partition-holder", p.id)
			h.proxies[p.idx].Partition()
			sleep(ctx, pauseFor)
			h.proxies[p.idx].Heal()
			h.healed("partition-holder")
		})
		return nil
	}},
}

// faultNames lists the fault kinds, sorted.
func faultNames() []string {
	var names []string
	for k := range faultKinds {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

func (h *harness) begin(kind, target string) {
	h.record(Event{T: mono(), Ev: evFault, Fault: kind, Target: target})
}

func (h *harness) healed(kind string) {
	h.record(Event{T: mono(), Ev: evHealed, Fault: kind})
}

// adminDo sends a command to every Redis node, directly (not through a
// proxy), and returns the first error.
func (h *harness) adminDo(ctx context.Context, args ...any) error {
	var first error
	for _, a := range h.admin {
		if err := a.Do(ctx, args...).Err(); err != nil && first == nil && err != redis.Nil {
			first = err
		}
	}
	return first
}
