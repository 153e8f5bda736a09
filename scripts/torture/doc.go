// Command torture is lockgen's fault harness: it runs worker processes on
// generated objects (tortureobj: a reentrant lock, a fenced lock, a
// semaphore of 3 permits and a reliable queue, leases of 2s), injects
// faults, and checks the merged log of every process for what must not
// happen.
//
//	go run ./scripts/torture [-n 8] [-rounds 2] [-faults a,b,...] [-cluster]
//	go run ./scripts/torture check -log events.jsonl
//
// It starts its own redis-server (scripts/redistest; a 3-primary cluster
// with -cluster) and N workers: its own binary again, sub-command worker,
// each with its own go-redis client and runtime client, connected to Redis
// through a TCP proxy of the harness's own (one per worker). Each worker
// runs four loops: lock the mutex, write to the storage three times
// (checking lease.Context().Err() before each write), unlock; the same on
// the fenced lock; take a permit, check it, release it; take a delivery
// from the queue and acknowledge it. The harness offers a message every
// 20ms.
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
