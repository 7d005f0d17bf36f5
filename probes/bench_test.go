package probes

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf/link"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/internal/testenv"
)

// hitloop drives testdata/bench/hitloop: it calls one entry point of the
// stand-in libraries N times and reports ns per call.
type hitloop struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startHitloop(b testing.TB, symbol string) *hitloop {
	b.Helper()
	dir := testenv.Fixtures(b)
	cmd := exec.Command(filepath.Join(dir, "hitloop"), dir, symbol)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	h := &hitloop{cmd: cmd, in: in, out: bufio.NewReader(out)}
	b.Cleanup(func() { in.Close(); cmd.Wait() })
	if line, err := h.out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		b.Fatalf("hitloop %s: %q %v", symbol, line, err)
	}
	return h
}

// calls makes the loop call its entry point n times, and returns the
// mean ns a call it printed.
func (h *hitloop) calls(n int) (string, error) {
	fmt.Fprintf(h.in, "%d\n", n)
	line, err := h.out.ReadString('\n')
	return strings.TrimSpace(line), err
}

// mustCall is calls for the test's own goroutine.
func (h *hitloop) mustCall(tb testing.TB, n int) {
	tb.Helper()
	if _, err := h.calls(n); err != nil {
		tb.Fatal(err)
	}
}

// nsPerCall is the fastest of three rounds of n calls.
func (h *hitloop) nsPerCall(b *testing.B, n int) float64 {
	b.Helper()
	var rounds []float64
	for range 3 {
		line, err := h.calls(n)
		if err != nil {
			b.Fatal(err)
		}
		v, err := strconv.ParseFloat(line, 64)
		if err != nil {
			b.Fatal(err)
		}
		rounds = append(rounds, v)
	}
	return slices.Min(rounds)
}

// planFor plans the probes gpuprof would put in the hitloop's libraries.
func planFor(b testing.TB, pid int, keep func(Probe) bool) []LibraryPlan {
	b.Helper()
	files, err := ExecutableFiles("/proc", pid)
	if err != nil {
		b.Fatal(err)
	}
	var plans []LibraryPlan
	for _, f := range files {
		if l := cudaapi.LayerOf(f.Base()); l != cudaapi.LayerRuntime && l != cudaapi.LayerDriver {
			continue
		}
		lp, err := PlanFile(f, Options{Launches: true})
		if err != nil {
			b.Fatal(err)
		}
		lp.Probes = slices.DeleteFunc(lp.Probes, func(p Probe) bool { return !keep(p) })
		plans = append(plans, lp)
	}
	return plans
}

func only(names ...string) func(Probe) bool {
	return func(p Probe) bool { return slices.Contains(names, p.API.Name) }
}

// BenchmarkProbeCost measures what each kind of probe adds to one call of
// the stand-in library, next to a bare uprobe (an empty program) at the
// same address, in the same run, and the effect of placement: a probe on
// endbr64 (single-stepped) against one on the push after it (emulated).
//
//	sudo go test -run '^$' -bench ProbeCost -benchtime 1x ./probes
func BenchmarkProbeCost(b *testing.B) {
	testenv.RequireRoot(b)
	const calls = 200000
	s, err := Open(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	objs := s.objs
	// Drain the ring buffer as attach does, so events cost what they cost
	// when someone reads them (a full buffer would make them cheaper).
	ctx, cancel := context.WithCancel(context.Background())
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		s.Run(ctx, func([]events.Event, []LibraryPlan) {})
	}()
	defer func() { cancel(); <-drained }()

	// measure runs symbol's loop with nothing attached and with attach's
	// probes, returning ns per call of each.
	measure := func(symbol string, attach func(pid int, plans []LibraryPlan) []link.Link) (none, with float64) {
		h := startHitloop(b, symbol)
		none = h.nsPerCall(b, calls)
		links := attach(h.cmd.Process.Pid, planFor(b, h.cmd.Process.Pid, func(Probe) bool { return true }))
		with = h.nsPerCall(b, calls)
		for _, l := range links {
			l.Close()
		}
		return none, with
	}
	// real attaches gpuprof's programs for the named entry points.
	real := func(names ...string) func(int, []LibraryPlan) []link.Link {
		return func(pid int, plans []LibraryPlan) []link.Link {
			var links []link.Link
			for _, lp := range plans {
				lp.Probes = slices.DeleteFunc(slices.Clone(lp.Probes), func(p Probe) bool { return !only(names...)(p) })
				ls, err := attachPlan(objs, pid, lp)
				if err != nil {
					b.Fatal(err)
				}
				links = append(links, ls...)
			}
			return links
		}
	}
	// bare attaches the empty program where real would attach, entry and
	// (if ret) return, at the probe offset or at offset 0 of the symbol.
	bare := func(ret, atZero bool, names ...string) func(int, []LibraryPlan) []link.Link {
		return func(pid int, plans []LibraryPlan) []link.Link {
			var links []link.Link
			for _, lp := range plans {
				var offs []uint64
				for _, p := range lp.Probes {
					if !only(names...)(p) {
						continue
					}
					off := p.Address()
					if atZero {
						off = p.Symbol.FileOffset
					}
					offs = append(offs, off)
				}
				if len(offs) == 0 {
					continue
				}
				l, err := AttachBare(objs, lp.File.HostPath, pid, offs)
				if err != nil {
					b.Fatal(err)
				}
				links = append(links, l)
				if ret {
					ex, _ := link.OpenExecutable(lp.File.HostPath)
					l, err := ex.UretprobeMulti(nil, objs.Bare, &link.UprobeMultiOptions{Addresses: offs, PID: uint32(pid)})
					if err != nil {
						b.Fatal(err)
					}
					links = append(links, l)
				}
			}
			return links
		}
	}
	type row struct {
		name         string
		bare, probed float64 // ns added per call
		hits         int     // probe hits per call
	}
	var rows []row
	var onEndbr, onPush float64
	for i := 0; i < b.N; i++ {
		rows = rows[:0]
		add := func(name, symbol string, hits int, bareAttach, realAttach func(int, []LibraryPlan) []link.Link) {
			n0, nb := measure(symbol, bareAttach)
			n1, nr := measure(symbol, realAttach)
			rows = append(rows, row{name, nb - n0, nr - n1, hits})
		}
		add("launch count (cuLaunchKernel)", "cuLaunchKernel", 1,
			bare(false, false, "cuLaunchKernel"), real("cuLaunchKernel"))
		add("launch count (cuLaunchKernelEx)", "cuLaunchKernelEx", 1,
			bare(false, false, "cuLaunchKernelEx"), real("cuLaunchKernelEx"))
		add("entry+return, event per call (cuStreamSynchronize)", "cuStreamSynchronize", 2,
			bare(true, false, "cuStreamSynchronize"), real("cuStreamSynchronize"))
		add("entry+return + output read (cudaEventElapsedTime, driver call underneath skipped)", "cudaEventElapsedTime", 4,
			bare(true, false, "cudaEventElapsedTime", "cuEventElapsedTime_v2"), real("cudaEventElapsedTime", "cuEventElapsedTime_v2"))
		add("entry+return, copy (cudaMemcpyAsync over cuMemcpyHtoDAsync_v2)", "cudaMemcpyAsync", 4,
			bare(true, false, "cudaMemcpyAsync", "cuMemcpyHtoDAsync_v2"), real("cudaMemcpyAsync", "cuMemcpyHtoDAsync_v2"))
		add("entry only, event per call (cudaEventRecord over cuEventRecord, the same event)", "cudaEventRecord", 2,
			bare(false, false, "cudaEventRecord", "cuEventRecord"), real("cudaEventRecord", "cuEventRecord"))
		add("entry only, event per call (cuEventRecord: records settled on the driver)", "cuEventRecord", 1,
			bare(false, false, "cuEventRecord"), real("cuEventRecord"))
		// Placement: the same empty program on endbr64 and on the push.
		n0, nz := measure("cuLaunchKernel", bare(false, true, "cuLaunchKernel"))
		n1, np := measure("cuLaunchKernel", bare(false, false, "cuLaunchKernel"))
		onEndbr, onPush = nz-n0, np-n1
	}
	b.StopTimer()
	b.Logf("ns added per call, bare = an empty program at the same addresses:")
	for _, r := range rows {
		b.Logf("  %-80s bare %6.0f  gpuprof %6.0f  (%d hits a call)  %.2fx bare", r.name, r.bare, r.probed, r.hits, r.probed/r.bare)
	}
	b.Logf("  placement of a bare probe on cuLaunchKernel: +0 endbr64 (single-stepped) %.0f ns, +4 push (emulated) %.0f ns: %.1fx", onEndbr, onPush, onEndbr/onPush)
	b.ReportMetric(rows[0].probed, "launch-ns/hit")
	b.ReportMetric(rows[0].bare, "bare-ns/hit")
	b.ReportMetric(rows[0].probed/rows[0].bare, "launch/bare")
	b.ReportMetric(rows[2].probed/2, "call-ns/hit")
	b.ReportMetric(onEndbr/onPush, "endbr64/push")
}
