# isrbench — build, run, test, benchmark, gate, profile.
GO      ?= go
BIN     ?= bin/isrbench
SPEC    ?= default
PKGS    ?= ./...
FUZZTIME ?= 20s

.PHONY: build run test race vet fmt fuzz bench sweep gate profile flame clean

build:
	$(GO) build -o $(BIN) ./cmd/isrbench

## run: the default workload on the embedded 3-broker cluster (short: about 20 s).
run: build
	$(BIN) run -w $(SPEC) --duration 15s --warmup 3s

## test: vet, gofmt check, and every test under the race detector.
test: vet fmt
	$(GO) test -race -count=1 -timeout 12m $(PKGS)

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
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./core/... ./netfetch/... ./iouring/...

## sweep: the num.replica.fetchers sweep.
sweep: build
	$(BIN) sweep -w fetchers --duration 10s --warmup 2s

## gate: a short regression gate against the committed baseline.
gate: build
	$(BIN) gate -w gate --baseline results/baselines/gate

## profile: a default run with cpu, heap, mutex and block profiles; then the top functions by role.
profile: build
	$(BIN) run -w $(SPEC) --duration 10s --warmup 2s --profile cpu,heap,mutex,block --out profiles/runs

## flame: pprof's web UI (flame graph) for the newest cpu profile.
flame: build
	$(BIN) profile web $$(ls -t $$(find profiles/runs -name 'cpu.pprof') | head -1)

clean:
	rm -rf bin results/runs profiles/runs
