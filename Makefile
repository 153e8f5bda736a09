# Developer and CI entry points. `make help` lists the targets.

GO ?= go
# Go sources, outside testdata (which may hold deliberately broken files).
GOFILES = $(shell find . -name '*.go' -not -path './.git/*' -not -path '*/testdata/*')

.DEFAULT_GOAL := help
.PHONY: help redis generate test fmt vet lint fuzz

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z][a-z-]*:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

redis: ## install redis-server if it is not in PATH (the tests start their own servers)
	@scripts/install-redis.sh

generate: ## run go generate ./...
	$(GO) generate ./...

test: redis ## go vet, then all tests with the race detector against real Redis
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 9m ./...

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
