// Command torture is lockgen's fault harness: it runs worker processes on
// generated objects (tortureobj: a reentrant lock, a fenced lock, a
// semaphore of 3 permits, a reliable queue and latches of 5, leases of
// 2s), injects
// faults, and checks the merged log of every process for what must not
// happen.
//
//	go run ./scripts/torture [-n 8] [-rounds 2] [-faults a,b,...] [-cluster] [-lose-reply 0.05]
//	go run ./scripts/torture check -log events.jsonl
//
// It starts its own redis-server (scripts/redistest; a 3-primary cluster
// with -cluster) and N workers: its own binary again, sub-command worker,
// each with its own go-redis client and runtime client, connected to Redis
// through a TCP proxy of the harness's own (one per worker). Each worker
// runs six loops: lock the mutex, re-enter it and unlock the inner hold,
// write to the storage three times (checking lease.Context().Err() before
// each write), unlock, reading the hold count from Redis after each step;
// the same without re-entry on the fenced lock; take a permit, read the
// semaphore's counts, check it, release it; take a delivery from the queue
// and acknowledge it; offer messages; count latches of 5 down, reading
// the count after each. The harness offers a message every 20ms.
//
// The lose-replies fault has the proxies lose the replies of a fraction
// of EVAL/EVALSHA requests after Redis ran them (go-redis retries them);
// the checker counts the double effects per class (defects.go) and checks
// the histories with porcupine (linear.go).
//
// Every event is a JSON line stamped with CLOCK_MONOTONIC, which on Linux
// is one clock for every process of the machine, so stamps of different
// processes compare. The storage is the harness itself: workers send their
// writes down a pipe and wait for its verdict, so writes have one order.
//
// The faults (see faultKinds) run one after another, each followed by a
// settle time; the checker (Check) attributes what it finds to the fault
// whose window it falls in and prints one table row per fault kind. See
// README.md for how to read the table.
package main
