# gpuprof: make demo (as root) shows it on a built-in demo job; make test
# (as root) runs every test, eBPF ones included; make check the fast tier
# (no root, no fixtures).

GO      ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
# cgo for NVML (go-nvml loads libnvidia-ml.so.1 with dlopen at run time, so
# the binary links only the C library): it runs on any GPU host whose glibc
# is as new as the build machine's, with no Go toolchain there, and without
# NVML it profiles on without the GPUs' hardware state. go-nvml's bindings
# call some functions NVML 13 deprecates: their warnings are not ours.
export CGO_ENABLED := 1
export CGO_CFLAGS := -O2 -Wno-deprecated-declarations
GOBUILD := $(GO) build -trimpath -ldflags "-X main.version=$(VERSION)"

# The Grafana Pyroscope server the Pyroscope tests push to and query
# (testdata/pyroscope-server pins it): built once, outside the checkout (a
# 97 MB binary, ~2.6 GB of module and build cache, 4-6 min on 2 cores),
# and named to the tests by GPUPROF_PYROSCOPE_BIN. One set in the
# environment is used as it is.
PYROSCOPE_VERSION := v1.9.0
PYROSCOPE_BIN ?= $(or $(GPUPROF_PYROSCOPE_BIN),$(HOME)/.cache/gpuprof/pyroscope-$(PYROSCOPE_VERSION))
export GPUPROF_PYROSCOPE_BIN := $(PYROSCOPE_BIN)

.PHONY: all build generate check-generated fixtures pyroscope-server check test bench fuzz demo soak clean

all: build

build:
	$(GOBUILD) -o bin/gpuprof ./cmd/gpuprof

# Rebuild the BPF object and its Go bindings (needs clang, llvm, libbpf-dev).
generate:
	cd bpf && $(GO) generate ./...

# Fail when the committed BPF object or bindings differ from what the C
# source compiles to. bpf2go's output does not depend on the checkout path,
# so a fresh build in a temporary copy must be byte-identical.
check-generated:
	@if ! command -v clang >/dev/null; then \
		echo "check-generated: clang not installed, not checking bpf/ generated files"; exit 0; fi; \
	tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	cp -r go.mod go.sum bpf $$tmp/ && (cd $$tmp/bpf && $(GO) generate ./... >/dev/null) || exit 1; \
	for f in gpuprof_x86_bpfel.o gpuprof_x86_bpfel.go; do \
		cmp -s $$tmp/bpf/$$f bpf/$$f || { echo "bpf/$$f is stale: run make generate and commit the result"; exit 1; }; \
	done; echo "check-generated: bpf/ generated files are fresh"

fixtures:
	$(MAKE) -s -C testdata

# Builds the server only if PYROSCOPE_BIN is missing (a new version gets a
# new name). Into a temporary name first: an interrupted build leaves no
# binary that looks whole.
pyroscope-server:
	@if [ -x "$(PYROSCOPE_BIN)" ]; then echo "pyroscope-server: $(PYROSCOPE_BIN) is there"; exit 0; fi; \
	mkdir -p "$(dir $(PYROSCOPE_BIN))" && start=$$(date +%s) && \
	(cd testdata/pyroscope-server && $(GO) build -o "$(PYROSCOPE_BIN).tmp" github.com/grafana/pyroscope/cmd/pyroscope) && \
	mv "$(PYROSCOPE_BIN).tmp" "$(PYROSCOPE_BIN)" && \
	echo "pyroscope-server: built $(PYROSCOPE_BIN) in $$(( $$(date +%s) - start )) s"

# The fast tier: every test that needs no root and no fixtures (the
# integration tests skip under -short). make test runs them all.
check:
	$(GO) vet ./...
	$(GO) test -short -count=1 ./...

# make test runs two packages at a time: the integration tests mostly
# wait on the loops they attach to (cmd/gpuprof and probes used 65 and 32 s
# of CPU in 205 and 143 s on the 2-core dev VM). The tests whose numbers a
# busy CPU moves (a loop's phases held to 5% of its own log, waits to the
# microsecond, a get timed to the consumer's own clock) run afterwards,
# alone: LOAD_SENSITIVE.
LOAD_SENSITIVE := ^(TestLoopShapes|TestPythonQueueWaits|TestWholeGetsByNativeAnchors)$$
test: check-generated fixtures pyroscope-server
	$(GO) vet ./...
	@# Whether this machine traps on hardware watchpoints decides which of
	@# the Python-function tests run (testenv.NoWatchpoints): said first.
	@$(GO) test -count=1 -v -run '^TestFires$$' ./internal/watchpoint | grep -E 'watchpoints on this machine|SKIP' || true
	$(GO) test -count=1 -p 2 -timeout 30m -skip '$(LOAD_SENSITIVE)' ./...
	$(GO) test -count=1 -p 1 -timeout 30m -run '$(LOAD_SENSITIVE)' ./cmd/gpuprof ./probes

bench: fixtures
	$(GO) test -count=1 -run '^$$' -bench 'ProbeCost|PythonLockProbe|PythonCallProbe|WholeGet|StackReads|CPUClockCost' -benchtime 1x -v ./probes
	$(GO) test -count=1 -run '^$$' -bench 'Correlate|DecodeRecord|ReadFileSymbols' -benchmem ./correlate ./probes
	$(GO) test -count=1 -run '^$$' -bench 'Load' -benchtime 5x ./bpf
	$(GO) test -count=1 -run '^$$' -bench 'SampleRound' -benchmem ./nvml
	$(GO) test -count=1 -run '^$$' -bench . -benchmem ./htmlreport ./perfetto ./report ./topview

# make fuzz runs each fuzz target (every func FuzzXxx of the tests
# checked in: the parsers of what the target controls) for FUZZTIME, one
# target a go test (-fuzz takes one), and prints a line for each: ok or
# FAIL, and its last execs and new interesting inputs. A failing input
# lands in the package's testdata/fuzz/FuzzXxx/, which make test and make
# check then run as a test. -fuzzminimizetime: go's 60 s default spent
# minimizing each new input of the ELF and memory-image targets would
# leave most of FUZZTIME unfuzzed. FUZZPARALLEL=1 on a small machine.
# ok*: go test failed with "context deadline exceeded" and no failing
# input, a race in go's fuzzing coordinator as FUZZTIME ends (Go 1.26;
# golang/go#75804, fixed in 1.27), not a finding.
FUZZTIME ?= 30s
FUZZMINIMIZETIME ?= 5s
FUZZPARALLEL ?=
fuzz: fixtures
	@fail=0; for t in $$(git grep -E -o '^func Fuzz[A-Za-z0-9_]+' -- '*_test.go' | sed -E 's|^(.*)/[^/]*:func |./\1:|'); do \
		pkg=$${t%%:*}; name=$${t#*:}; log=$$(mktemp); \
		if $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) \
			$(if $(FUZZPARALLEL),-parallel $(FUZZPARALLEL)) $$pkg >$$log 2>&1; then r=ok; \
		elif grep -q '^    context deadline exceeded$$' $$log && ! grep -q 'Failing input written\|failure while testing seed' $$log; then r=ok*; \
		else r=FAIL; fail=1; fi; \
		printf 'fuzz: %-4s %-10s %-20s %s\n' $$r $$pkg $$name "$$(grep '^fuzz: elapsed' $$log | tail -1 | sed 's/^fuzz: elapsed: [^,]*, //')"; \
		[ $$r = ok ] || grep -v '^fuzz: elapsed' $$log | tail -20; rm -f $$log; \
	done; exit $$fail

# The soak (testdata/soak, docs/soak.md): gpuprof attached for
# SOAK_DURATION to stand-ins making ~40,000 probed calls a second; fails
# if its RSS grows or events go unaccounted for. Its RSS samples
# (soak.csv) and gpuprof's output go to SOAK_OUT.
SOAK_DURATION ?= 1h
SOAK_OUT ?= soak-out
soak: build fixtures
	GPUPROF_SOAK_DURATION=$(SOAK_DURATION) GPUPROF_SOAK_OUT=$(abspath $(SOAK_OUT)) GPUPROF_SOAK_BIN=$(CURDIR)/bin/gpuprof \
		$(GO) test -count=1 -v -timeout 0 -run '^TestSoak$$' ./testdata/soak

demo: build fixtures
	./testdata/demo/run.sh

clean:
	rm -rf bin demo-out soak-out
	$(MAKE) -s -C testdata clean
