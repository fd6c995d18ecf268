# dlock development targets. Servers run natively on 127.0.0.1 (see
# CONTRIBUTING.md); `make test` starts them all, runs every test against
# them with no backend allowed to skip, and stops them again.

GO          ?= go
DLOCKENV    := bin/dlockenv
# Every package of every module of the workspace (go.work): with a go.work,
# ./... at the root would stop at the nested modules.
PKGS        := github.com/dlock-go/dlock/...
# The modules, each with its own go.mod (see CONTRIBUTING.md, Modules).
MODULES     := . backend/consul backend/etcd backend/postgres backend/zookeeper cron otel tools
GOTEST      := $(GO) test -race -count=1 -timeout 30m
# Staticcheck 2026.2.2; needs Go 1.26 to build and understands Go 1.26 code.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(shell $(GO) env GOPATH)/bin/staticcheck

# `make up TOPOLOGIES="redis etcd3"` starts only those.
TOPOLOGIES ?=

.PHONY: all deps dlockenv up down status env test bench bench-peers faults faults-ci lint tidy tidy-check no-replace release-check compose \
	start stop kill pause resume

all: lint test

deps:
	scripts/install-deps.sh

dlockenv:
	$(GO) build -o $(DLOCKENV) ./tools/cmd/dlockenv

up: deps dlockenv
	$(DLOCKENV) up $(TOPOLOGIES)

down: dlockenv
	$(DLOCKENV) down

status: dlockenv
	$(DLOCKENV) status

env: dlockenv
	$(DLOCKENV) env

# Node control for fault experiments: make kill NODE=redlock-3
start stop kill pause resume: dlockenv
	@test -n "$(NODE)" || { echo "usage: make $@ NODE=<node> (see: $(DLOCKENV) status)" >&2; exit 2; }
	$(DLOCKENV) $@ $(NODE)

# go-zookeeper v1.0.4 has a data race of its own on reconnect (see
# backend/zookeeper/reconnect_test.go): the tests that force one are built
# only without -race and run in a second pass.
ZK_RECONNECT_TESTS := TestLeaderKill|TestSessionKilledFromOutside|TestPartitionLosesBeforeExpiry
# Four packages at a time: the servers' tests mostly wait (leases, watches,
# lapses), so on 2 cores four overlap the longest (consul, etcd,
# zookeeper, redis) instead of running them two by two.
TEST_PARALLEL ?= 4
test:
	scripts/with-servers.sh bash -c '$(GOTEST) -p $(TEST_PARALLEL) $(PKGS) && \
		$(GO) test -count=1 -timeout 10m -run "$(ZK_RECONNECT_TESTS)" -v ./backend/zookeeper/ | grep -E "^(=== RUN|--- |PASS|FAIL|ok)"; exit $${PIPESTATUS[0]}'

bench:
	scripts/with-servers.sh $(GO) test -run '^$$' -bench . -benchmem -timeout 30m $(PKGS)

# dlock beside its peers (bare SET NX PX, the same with an INCR token,
# redislock, redsync, etcd's concurrency.Mutex, zk.Lock, Consul's api.Lock)
# on the servers it starts,
# in one run; writes BENCHMARKS.md. BENCH_PEERS_FLAGS passes flags to
# tools/cmd/benchpeers (e.g. -reps 1 -duration 1s -holds 1000). The results
# are also kept in bin/benchmarks.json: `bin/benchpeers -render
# bin/benchmarks.json -out BENCHMARKS.md` writes the report again without a run.
BENCH_PEERS_TOPOLOGIES := redis redlock etcd zookeeper consul
BENCH_PEERS_FLAGS ?=
# BENCH_PEERS_NOTE is printed at the top of BENCHMARKS.md (say if the machine was shared).
BENCH_PEERS_NOTE ?=
bench-peers:
	cd tools && $(GO) build -o ../bin/benchpeers ./cmd/benchpeers
	TOPOLOGIES="$(BENCH_PEERS_TOPOLOGIES)" scripts/with-servers.sh bin/benchpeers -out $(CURDIR)/BENCHMARKS.md -json $(CURDIR)/bin/benchmarks.json \
		-command "make bench-peers$(if $(BENCH_PEERS_FLAGS), BENCH_PEERS_FLAGS='$(BENCH_PEERS_FLAGS)')" -note "$(BENCH_PEERS_NOTE)" $(BENCH_PEERS_FLAGS)

# The fault matrix: kills, pauses and partitions real servers and clients,
# and writes the scenario x backend table to FAULTS.md.
faults:
	DLOCK_FAULTS_REPORT=$(CURDIR)/FAULTS.md scripts/with-servers.sh $(GOTEST) -tags faults ./tools/faults/...
	@cat FAULTS.md

# A quick part of the fault matrix (about 2 minutes), for a change that
# touches the harness; CI runs the whole matrix (make faults).
FAULTS_CI_RUN := TestFaults/(1-baseline|2-pause-past-lease|4-holder-killed|6-redis-restart|8-leader|16-semaphore-paused)/(redis|etcd|etcd3)$$
faults-ci:
	scripts/with-servers.sh $(GOTEST) -tags faults -run '$(FAULTS_CI_RUN)' ./tools/faults/...

# Vet and staticcheck also see the files behind the faults build tag.
lint:
	@unformatted=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt -l: not formatted:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet -tags faults $(PKGS)
	@test -x $(STATICCHECK) && $(STATICCHECK) -version | grep -qF '($(patsubst v%,%,$(STATICCHECK_VERSION)))' || \
		$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	$(STATICCHECK) -tags faults $(PKGS)

# go mod tidy in every module, each on its own as a user's build sees it
# (GOWORK=off, no replace): the repository's own modules come from a local
# module proxy built from the working tree, at the versions the go.mod
# files require (tools/cmd/release; CONTRIBUTING.md, Modules). tidy also
# keeps go.work's replace list in step; tidy-check fails if a module is not
# tidy or a go.mod has a replace directive; CI runs it.
RELEASE := $(GO) run ./tools/cmd/release
tidy:
	$(RELEASE) tidy

tidy-check: no-replace
	$(RELEASE) tidy -check

# No go.mod may have a replace directive: go install pkg@version refuses a
# module that has one, and a user's build would ignore it anyway.
no-replace:
	$(RELEASE) replaces

# What a release of version RELEASE_VERSION would publish: every module
# requiring its siblings at that version builds and vets on its own
# (GOWORK=off), and go install .../tools/cmd/lockctl@RELEASE_VERSION works,
# all against a local module proxy of the working tree. Changes nothing;
# `go run ./tools/cmd/release check -version vX.Y.Z -write` also writes the
# go.mod files and go.work for the release commit.
RELEASE_VERSION ?= v0.1.0
release-check: no-replace
	$(RELEASE) check -version $(RELEASE_VERSION)

# Regenerate compose/ from internal/topology.
compose:
	$(GO) run ./tools/cmd/dlockenv compose
