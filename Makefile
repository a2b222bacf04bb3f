SHELL := /bin/bash
# isrbench — build, run, test, benchmark, gate, profile.
GO      ?= go
BIN     ?= bin/isrbench
SPEC    ?= default
PKGS    ?= ./...
FUZZTIME ?= 20s

.PHONY: build run test interop race vet fmt fuzz bench sweep gate profile flame browser-deps sim sim-ci clean

build:
	$(GO) build -o $(BIN) ./cmd/isrbench

## run: the default workload on the embedded 3-broker cluster (short: about 20 s).
run: build
	$(BIN) run -w $(SPEC) --duration 15s --warmup 3s

## test: vet, gofmt check, every test under the race detector, then the interop suite.
test: vet fmt
	$(GO) test -race -count=1 -timeout 20m $(PKGS)
	$(MAKE) interop
	$(MAKE) sim-ci

## interop: real Kafka clients (kcat, confluent-kafka-python, kafka-python, kafkajs, sarama,
## segmentio/kafka-go) against the embedded cluster; a separate Go module (interop/go.mod).
## A missing client skips its test unless ISRBENCH_REQUIRE_INTEROP=1 (.ci/run sets it).
interop:
	cd interop && $(GO) vet ./... && $(GO) test -race -count=1 -timeout 10m # local directory mode: prints the table

## sim-ci: the deterministic simulator over SIM_CI_SEEDS seeds without the race detector
## (under -race make test runs it over fewer). sim: a longer soak, SEEDS=N (default 20000)
## from seed SIM_FIRST (default 1).
SIM_CI_SEEDS ?= 2000
SEEDS ?= 20000
SIM_FIRST ?= 1
sim-ci:
	$(GO) test -count=1 -timeout 10m ./core/sim -run 'TestSimulation$$' -sim.seeds=$(SIM_CI_SEEDS) -v | grep -E 'seeds in|^(ok|FAIL|---)|seed [0-9]+:' ; exit $${PIPESTATUS[0]}

sim:
	$(GO) test -count=1 -timeout 0 ./core/sim -run 'TestSimulation$$' -sim.first=$(SIM_FIRST) -sim.seeds=$(SEEDS) -v | grep -vE '^=== RUN'

## browser-deps: what the report.html browser test needs (it is skipped without them unless
## ISRBENCH_REQUIRE_BROWSER is set): Debian's chromium (apt-get install chromium) and this npm ci.
browser-deps:
	npm ci --prefix results/report/testdata/browser --no-audit --no-fund

race:
	$(GO) test -race -count=1 $(PKGS)

vet:
	$(GO) vet $(PKGS)

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## fuzz: run each fuzz target for FUZZTIME.
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

## bench: Go benchmarks of the hot paths (append, read, HW advance, fetch serving, produce).
## The fetch benchmarks by partition count (core/broker: FetchParkedWake, FetchServe,
## ProduceRoundRobin, SessionFetchWake: a parked session's wake-up apart from its produce)
## stop at 1000 partitions; ISRBENCH_FETCHBENCH_MAX=10000 adds 10,000.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./core/... ./netfetch/... ./iouring/...

## sweep: the num.replica.fetchers sweep.
sweep: build
	$(BIN) sweep -w fetchers --duration 10s --warmup 2s

## gate: the CI regression gate, <= 2 min: this tree (B) against GATE_BASE (A), GATE_REPEAT runs a
## side of the gate spec interleaved on this machine, each round's order at random with base first
## in half of the rounds (isrbench gate --against --order random), tested on throughput, latency
## and cost (CPU per record and per request; the request handlers' local time per record,
## allocations and system calls per request at alpha 0.05; the rest at 0.01). GATE_BASE is a git
## revision (default HEAD: in CI a same-vs-same check; set GATE_BASE=origin/main for a PR) or a
## baseline directory such as results/baselines/gate (fair only on the machine that recorded it).
## Outside git it compares two runs of this build. GATE_FLAGS adds gate flags, e.g.
## GATE_FLAGS='--set-new isrbench.produce.spin=35us' (35 µs more CPU per produced record, about
## +10% CPU per record on the gate spec, to see the gate catch it). Thresholds and measurements: results/baselines/README.md.
GATE_REPEAT ?= 7
GATE_FLAGS  ?=
gate:
	$(GO) build -trimpath -o bin/isrbench-gate ./cmd/isrbench
	@base='$(or $(GATE_BASE),HEAD)'; \
	if [ -d "$$base" ]; then mode="--baseline $$base"; \
	elif git rev-parse --verify -q "$$base^{commit}" >/dev/null 2>&1; then mode="--against $$base"; \
	else echo "gate: $$base is neither a directory nor a git revision: comparing two runs of this build"; mode="--binary bin/isrbench-gate"; fi; \
	echo "bin/isrbench-gate gate $$mode"; \
	bin/isrbench-gate gate -w workloads/specs/gate.yaml $$mode --repeat $(GATE_REPEAT) --order random \
	  --alpha 0.01 --alpha local/rec=0.05 --alpha allocs/req=0.05 --alpha syscalls/req=0.05 \
	  --threshold records/s=10% --threshold MB/s=10% --threshold p50-ack=25% --threshold p99-ack=50% \
	  --threshold p999-ack=50% --threshold p99-hwlag=50% --threshold p99-e2e=50% \
	  --threshold cpu/rec=10% --threshold local/rec=25% --threshold cpu/req=10% --threshold allocs/req=5% --threshold syscalls/req=5% \
	  $(GATE_FLAGS)

## profile: a default run with cpu, heap, allocs, mutex and block profiles of the measurement window
## (profiles/runs/<id>/profiles/*.pprof); then the cpu profile's top functions and its split by role.
profile: build
	$(BIN) run -w $(SPEC) --duration 10s --warmup 2s --profile cpu,heap,allocs,mutex,block --out profiles/runs
	@cpu=$$(ls -t $$(find profiles/runs -name cpu.pprof) | head -1); \
	$(BIN) profile top "$$cpu" -n 20 && $(BIN) profile top "$$cpu" --by role -n 10

## flame: pprof's web UI (flame graph at /ui/flamegraph) for the newest cpu profile (make profile first).
flame: build
	@cpu=$$(ls -t $$(find profiles/runs -name cpu.pprof 2>/dev/null) 2>/dev/null | head -1); \
	if [ -z "$$cpu" ]; then echo "flame: no cpu.pprof under profiles/runs: run make profile first"; exit 2; fi; \
	$(BIN) profile web "$$cpu"

clean:
	rm -rf bin results/runs profiles/runs
