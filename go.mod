module github.com/gpuprof/gpuprof

go 1.26.0

require (
	// Loads the BPF programs, attaches uprobe_multi links, reads the ring
	// buffer; its bpf2go (the tool line below) generates bpf/'s bindings.
	github.com/cilium/ebpf v0.22.0
	// POSIX-style command-line flags, as the brief asks.
	github.com/spf13/pflag v1.1.0
	// Decodes the first instruction of each probed function, to place the
	// probe where the kernel emulates rather than single-steps.
	golang.org/x/arch v0.33.0
	// pidfd, capget and CLOCK_MONOTONIC.
	golang.org/x/sys v0.50.0
	// Whether stderr is a terminal, for the live line.
	golang.org/x/term v0.48.0
)

// Demangles C++ symbols so --probe can name mooncake::RealClient::get_into
// rather than its mangling (the demangler Go's pprof uses).
require github.com/ianlancetaylor/demangle v0.0.0-20260724033716-83e58baca724

// NVML bindings for nvml/ (libnvidia-ml.so.1 is dlopened at run time, so
// building needs no driver) and the DGX mocks its tests run on.
require github.com/NVIDIA/go-nvml v0.13.4-1

// The profiles gpuprof sends to Pyroscope are pprof profiles built with
// Go's pprof package (profiles/; untagged: the latest commit), and
// pyroscope-go's upstream/remote sends them (pyroscope/; v1.5.0, the
// newest the module proxy serves).
require (
	github.com/google/pprof v0.0.0-20261105003125-4bf881d7fb0b
	github.com/grafana/pyroscope-go v1.5.0
)

// Serves --metrics-addr to Prometheus (metrics/): the registry, the text
// and protobuf formats, the Go and process collectors, promlint for tests.
require github.com/prometheus/client_golang v1.25.0

// client_golang's metric types, which metrics/'s tests read what the
// registry gathers as (a version client_golang requires anyway).
require github.com/prometheus/client_model v0.6.3

// gpuprof top's full-screen view (topview/): the terminal's alternate
// screen, keys and resize events, in tmux too (its terminfo built in).
require github.com/gdamore/tcell/v2 v2.13.10

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/gdamore/encoding v1.0.1 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/lucasb-eyer/go-colorful v1.3.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

// An HTML5 parser, for the tests that read the report's DOM back from
// headless Chromium (cmd/gpuprof/report_test.go).
require golang.org/x/net v0.62.0

tool github.com/cilium/ebpf/cmd/bpf2go
