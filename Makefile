# The two commands a new user runs (see README.md):
#   make demo   - starts local PostgreSQL servers and runs `shardid demo`
#   make test   - runs the whole test suite against real PostgreSQL servers
# Both install PostgreSQL's binaries first when the machine lacks them.

GO ?= go

.PHONY: demo test build bench lint

demo:
	./scripts/ensure-postgres
	$(GO) run ./cmd/shardid demo

test: lint
	./scripts/ensure-postgres
	$(GO) test -race -count=1 -timeout 30m ./...

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

build:
	$(GO) build -o shardid ./cmd/shardid

bench:
	./scripts/ensure-postgres
	$(GO) run ./cmd/shardid bench
