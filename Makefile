# The two commands a new user runs (see README.md):
#   make demo   - starts local PostgreSQL servers and runs `shardid demo`
#   make test   - runs the whole test suite against real PostgreSQL servers
# Both install PostgreSQL's binaries first when the machine lacks them.

GO ?= go

.PHONY: demo test build bench lint release

demo:
	./scripts/ensure-postgres
	$(GO) run ./cmd/shardid demo

test: lint
	./scripts/ensure-postgres
	$(GO) test -race -count=1 -timeout 60m ./...   # a bound on a hang: a loaded machine took over 30m

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	GOOS=darwin GOARCH=arm64 $(GO) build -o /dev/null ./cmd/shardid   # make release builds darwin too

build:
	$(GO) build -o shardid ./cmd/shardid

bench:
	./scripts/ensure-postgres
	$(GO) run ./cmd/shardid bench

# Cross-builds linux and darwin, amd64 and arm64, into dist/ with the version
# stamped (VERSION=v0.2.0 make release, else git describe) and SHA256SUMS.
release:
	./scripts/release
