# The two commands a new user runs (see README.md):
#   make demo   - starts local PostgreSQL servers and runs `shardid demo`
#   make test   - runs the whole test suite against real PostgreSQL servers
# Both install PostgreSQL's binaries first when the machine lacks them.
#   make test-versions - the whole suite on each PostgreSQL major, 14 to 18
#                  (server binaries from the npm registry, scripts/ensure-pg-bundles)

GO ?= go

# make install puts the binary in $(BINDIR): PREFIX/bin when PREFIX is
# given (PREFIX=/usr/local make install), else Go's own install directory,
# $(go env GOBIN) or $(go env GOPATH)/bin.
PREFIX ?=
BINDIR ?= $(if $(PREFIX),$(PREFIX)/bin,$(or $(shell $(GO) env GOBIN),$(shell $(GO) env GOPATH)/bin))

.PHONY: demo test test-versions build install bench lint release ext

demo:
	./scripts/ensure-postgres
	$(GO) run ./cmd/shardid demo

test: lint
	./scripts/ensure-postgres
	$(MAKE) ext
	./scripts/ensure-faketime   # the failover tests run a standby under libfaketime
	./scripts/ensure-pgbouncer  # the pooler tests put PgBouncer in front of the test servers
	./scripts/ensure-chromium   # the console's browser tests
	./scripts/ensure-examples   # the Python and Node examples (psycopg2, node-postgres)
	$(GO) test -race -count=1 -timeout 60m ./...   # a bound on a hang: a loaded machine took over 30m
	./scripts/test-versions --quick 14 16 17 18   # the generator's uniqueness and an online move on the other majors

test-versions:
	./scripts/test-versions

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags charts ./cmd/shardid ./internal/app/charts   # bench --svg: the charts stay out of the default build
	GOOS=darwin GOARCH=arm64 $(GO) build -o /dev/null ./cmd/shardid   # make release builds darwin too

build:
	$(GO) build -o shardid ./cmd/shardid

install:
	mkdir -p $(BINDIR)
	$(GO) build -o $(BINDIR)/shardid ./cmd/shardid
	@echo "installed $(BINDIR)/shardid"; case ":$$PATH:" in *":$(BINDIR):"*) ;; *) echo "$(BINDIR) is not on PATH: export PATH=\"$(BINDIR):\$$PATH\"";; esac

bench:
	./scripts/ensure-postgres
	$(MAKE) ext
	$(GO) run ./cmd/shardid bench

# The optional C generator (ext/shardid): built with PGXS against the installed
# server (its headers pinned to its exact version by scripts/ensure-pgdev) and
# installed into it, where shardid init finds it (pg_available_extensions).
# Installing writes under /usr/lib/postgresql: as root, or through sudo.
PG_CONFIG ?= $(lastword $(sort $(wildcard /usr/lib/postgresql/*/bin/pg_config)))
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
ext:
	./scripts/ensure-pgdev
	$(MAKE) -C ext/shardid PG_CONFIG=$(PG_CONFIG)
	$(SUDO) $(MAKE) -C ext/shardid PG_CONFIG=$(PG_CONFIG) install

# Cross-builds linux and darwin, amd64 and arm64, into dist/ with the version
# stamped (VERSION=v0.2.0 make release, else git describe) and SHA256SUMS.
release:
	./scripts/release
