# Developer and CI entry points. `make help` lists the targets.

GO ?= go
# Every go command of these targets compiles with -trimpath: the build
# cache's entries then do not depend on the checkout's directory, so a
# second worktree or clone (CI's clean clone) reuses what another one
# compiled. A GOFLAGS of your own replaces it.
export GOFLAGS ?= -trimpath
# Go sources, outside testdata (which may hold deliberately broken files).
GOFILES = $(shell find . -name '*.go' -not -path './.git/*' -not -path '*/testdata/*')

.DEFAULT_GOAL := help

.PHONY: help redis chromium generate check demo test costs bench torture fmt vet lint fuzz

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z][a-z-]*:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

redis: ## install redis-server if it is not in PATH (the tests start their own servers)
	@scripts/install-redis.sh

chromium: ## install chromium if it is not in PATH (the dashboard's browser test drives it)
	@scripts/install-chromium.sh

generate: ## run go generate in both modules (the benchmarks are a module of their own)
	$(GO) generate ./...
	cd scripts/bench && $(GO) generate ./...

check: ## lockgen check every committed spec (both modules): fails when generated code is stale or specs share keys
	$(GO) run ./cmd/lockgen check ./... ./scripts/bench/...

demo: ## generate the examples and run them (against REDIS_ADDR, or an embedded Redis); ends with lockgen inspect's view
	$(GO) generate ./examples/...
	$(GO) run ./examples/orders
	$(GO) run ./examples/ops

# Every suite of `make test`, run to its end even when one before failed
# (.ci/suites, SUITE_JOBS at once); the failures are named again at the
# end, and the summary line is the last thing printed. The race detector
# runs on the packages with concurrency (RACE: the runtime and what drives
# it); the generator, spec and analysis packages (FAST, below) run
# without it, as in `make fast`. The runtime's tests mostly wait on
# leases and timers: many run at once (-parallel), and the wait-bound
# suite starts first so that the CPU-bound ones run beside it. go-redis'
# own logging is silenced in tests unless -v (scripts/redistest).
PARALLEL ?= 8
TESTFLAGS ?=
SUITE_JOBS ?= 2
RACE = ./runtime/... ./inspect/... ./dashboard/... ./examples/... ./scripts/... ./templates/...
SUITES = \
	'race=$(GO) test -race -count=1 -timeout 20m -parallel $(PARALLEL) $(TESTFLAGS) $(RACE)' \
	'check=$(GO) run ./cmd/lockgen check ./... ./scripts/bench/...' \
	'vet=$(GO) vet ./...' \
	'fast=$(GO) test -count=1 -timeout 9m $(TESTFLAGS) $(FAST)' \
	'browser=cd dashboard/browsertest && $(GO) vet ./... && $(GO) test -count=1 -timeout 3m $(TESTFLAGS) ./...' \
	'prometheus=cd adapters/prometheus && $(GO) vet ./... && $(GO) test -race -count=1 $(TESTFLAGS) ./...' \
	'otel=cd adapters/otel && $(GO) vet ./... && $(GO) test -race -count=1 $(TESTFLAGS) ./...'
test: redis chromium ## lockgen check, go vet, then every module's tests (race detector, real Redis); reports every failure at the end
	@SUITE_JOBS=$(SUITE_JOBS) .ci/suites $(SUITES)

# The cost tests: what depends on time (commands per window, throughput
# floors, allocations from the process-wide MemStats, counts under
# contention with tolerances). scripts/bench's tests, and the runtime's
# that need its test-only exports (files tagged costs).
costs: redis ## the cost tests (scripts/bench, and runtime's -tags costs), with tolerances: throughput, allocations, commands per window
	@SUITE_JOBS=$(SUITE_JOBS) .ci/suites \
		'bench=cd scripts/bench && $(GO) vet ./... && $(GO) test -count=1 -timeout 5m $(TESTFLAGS) ./...' \
		'schedulers=cd scripts/bench/asynq26 && $(GO) vet ./... && $(GO) test -count=1 -timeout 2m $(TESTFLAGS) ./...' \
		'runtime-costs=$(GO) vet -tags costs ./runtime && $(GO) test -tags costs -count=1 -timeout 5m -run '"'"'Cost|WakeOneAcrossClients|FairOrder|DelayedDelivery|DelayedReliable|RWReadersHandedTogether|SemaphoreReleaseWakesK|QueueTakeWaits|TakesStartTogether'"'"' $(TESTFLAGS) ./runtime'

# The fast tests: everything but the runtime (and what needs Redis).
FAST = ./internal/spec/... ./internal/keys/... ./internal/gen/... ./internal/evolve/... \
	./internal/specset/... ./internal/leasecheck/... ./internal/gotypes/... ./internal/diff/... \
	./internal/suggest/... ./internal/docs/... ./cmd/...
.PHONY: fast go127 compare-schedules bench-worker
bench-worker: redis ## lockgen's worker beside asynq v0.26's server (defaults, and a 10 ms task check), 8 workers, 4 producers, rounds interleaved (WORKER_ROUNDS, default 8)
	cd scripts/bench/asynq26 && $(GO) test -run='^$$' -bench 'BenchmarkWorker$$' -benchtime $(or $(WORKER_ROUNDS),8)x -v . | grep -E 'Benchmark|per round|ok|FAIL'

compare-schedules: redis ## 8 instances each of asynq v0.26's Scheduler and PeriodicTaskManager and of a lockgen schedule, one tick a second (LOCKGEN_SCHEDULER_WINDOW, default 10s): what each enqueued per tick
	cd scripts/bench/asynq26 && $(GO) test -count=1 -v -run TestSchedulersSideBySide ./... | grep -E 'instances|ok|FAIL'

fast: ## build and vet everything, then the fast tests (spec, keys, gen, cmd: no Redis)
	$(GO) build ./...
	$(GO) vet ./...
	$(GO) test -count=1 $(FAST)

# GO127 is the newest Go 1.27.x the module proxy serves (the go directive
# stays at 1.26, the older supported release); go1.27.4 when it cannot be asked.
GO127 ?= $(shell $(GO) list -m -versions golang.org/toolchain 2>/dev/null | tr ' ' '\n' | \
	sed -n 's/^v0\.0\.1-\(go1\.27\.[0-9]*\)\.$(shell $(GO) env GOOS)-$(shell $(GO) env GOARCH)$$/\1/p' | sort -V | tail -n 1)
go127: ## make fast with the newest Go 1.27.x toolchain (GOTOOLCHAIN, from the module proxy)
	@v="$(GO127)"; v="$${v:-go1.27.4}"; echo "GOTOOLCHAIN=$$v"; \
	GOTOOLCHAIN=$$v $(GO) version && GOTOOLCHAIN=$$v $(MAKE) --no-print-directory fast

BENCH ?= .
BENCHFLAGS ?= -count 1
bench: redis ## benchmarks against the peers; e.g. make bench BENCH='Uncontended|Handoff' BENCHFLAGS='-count 5'
	cd scripts/bench && $(GO) test -run='^$$' -bench '$(BENCH)' -benchmem $(BENCHFLAGS) | tee out.txt

TORTUREFLAGS ?= -n 8 -rounds 2
torture: redis ## fault harness, long mode: 8 worker processes, every fault kind twice (~4 min); prints the table; then torture-schedules
	$(GO) run ./scripts/torture $(TORTUREFLAGS)
	@$(MAKE) --no-print-directory torture-schedules

# The volume tests at full volume (runtime/waiting_test.go's volume):
# `make test` runs them at a fifth, which asserts the same.
SOAK = TestQueueManyClients|TestReliableManyClients|TestMutualExclusion|TestFencedTokens|TestRWExclusion
.PHONY: soak
soak: redis ## the runtime's volume tests at full volume (100k queue items, 16k lock sections, 10k fenced tokens), race detector on (~5 min)
	LOCKGEN_SOAK=1 $(GO) test -race -count=1 -timeout 30m -run '^($(SOAK))$$' ./runtime

.PHONY: torture-schedules
torture-schedules: redis ## 8 schedule replica processes fire a 1s schedule for 60s (kill -9, all down, Redis restart), on a node and a 3-primary cluster: each tick once
	LOCKGEN_SCHEDULE_WINDOW=60s $(GO) test -count=1 -timeout 10m -run 'TestScheduleReplicas' -v ./runtime

fmt: ## gofmt every Go file in place
	gofmt -w $(GOFILES)

vet: ## go vet ./...
	$(GO) vet ./...

lint: ## fail if any file needs gofmt, then go vet
	@files="$$(gofmt -l $(GOFILES))"; \
	if [ -n "$$files" ]; then echo "these files need gofmt (run make fmt):"; echo "$$files"; exit 1; fi
	$(GO) vet ./...

fuzz: ## fuzz the spec parser and the key encoder, 30s each
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=30s ./internal/spec
	$(GO) test -run='^$$' -fuzz=FuzzKeys -fuzztime=30s ./internal/keys
