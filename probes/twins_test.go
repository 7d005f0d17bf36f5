package probes

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

func TestTwinVerdict(t *testing.T) {
	for _, c := range []struct {
		runtime, direct uint64
		detach, restart bool
	}{
		{runtime: twinEvidence - 1, direct: 0},              // too soon
		{runtime: twinEvidence, direct: 0, detach: true},    // all through the runtime
		{runtime: 1000, direct: 10, detach: true},           // NCCL's odd direct call
		{runtime: 1000, direct: 11, restart: true},          // a JAX-like share
		{runtime: twinEvidence, direct: 146, restart: true}, // NCCL connecting DDP's ranks: try again
		{runtime: 64700, direct: 38500, restart: true},      // DDP's event records (NCCL's own runtime)
		{runtime: twinEvidence - 1, direct: 5000},           // driver-only so far: wait
	} {
		detach, restart := twinVerdict([2]uint64{c.runtime, c.direct})
		if detach != c.detach || restart != c.restart {
			t.Errorf("runtime %d, direct %d: detach %v restart %v, want %v %v", c.runtime, c.direct, detach, restart, c.detach, c.restart)
		}
	}
}

func TestSplitTwins(t *testing.T) {
	var lp LibraryPlan
	lp.Layer = cudaapi.LayerDriver
	for _, name := range []string{"cuLaunchKernel", "cuMemcpyAsync", "cuStreamSynchronize", "cuEventRecord",
		"cuEventElapsedTime_v2", "cuMemAlloc_v2", "cuMemcpyHtoDAsync_v2"} {
		a, ok := cudaapi.ByName(name)
		if !ok {
			t.Fatalf("no %s", name)
		}
		lp.Probes = append(lp.Probes, Probe{API: a})
	}
	rest, twins := splitTwins(lp)
	names := func(p LibraryPlan) (out []string) {
		for _, pr := range p.Probes {
			out = append(out, pr.API.Name)
		}
		return out
	}
	if got := names(rest); len(got) != 2 || got[0] != "cuLaunchKernel" || got[1] != "cuMemAlloc_v2" {
		t.Errorf("kept with the library: %v, want the launch and the allocation", got)
	}
	want := map[string]int{"copies": 2, "syncs": 1, "event calls": 2}
	for g, n := range want {
		if got := len(twins[g].Probes); got != n || twins[g].Layer != cudaapi.LayerDriver {
			t.Errorf("group %s: %v, want %d probes", g, names(twins[g]), n)
		}
	}
	lp.Layer = cudaapi.LayerRuntime
	if rest, twins := splitTwins(lp); len(twins) != 0 || len(rest.Probes) != len(lp.Probes) {
		t.Errorf("a runtime plan was split: %d twins", len(twins))
	}
}

// TestDriverTwinsDetached: the demo's copies, syncs and event calls all go
// through the runtime, so once it has made enough of each their driver
// probes go, the runtime's still time every one, and a runtime call then
// runs the entry program once, not twice.
func TestDriverTwinsDetached(t *testing.T) {
	s := openSession(t)
	st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		t.Fatalf("BPF statistics: %v", err)
	}
	defer st.Close()
	d := startDemo(t, "--steps", "600", "--start-delay", "0.3")
	waitForFile(t, d.PID(), "libcuda.so.1")
	if _, err := s.Attach(d.PID()); err != nil {
		t.Fatal(err)
	}
	// Long enough for ~200 stream syncs, one a step.
	if _, err := runFor(t, s, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	counts := s.twinCalls[d.PID()]
	left := 0
	for _, l := range s.targets[d.PID()].libs {
		left += len(l.twins)
	}
	s.mu.Unlock()
	for _, g := range []string{"copies", "syncs", "event calls"} {
		if n, ok := counts[g]; !ok || n != nil {
			t.Errorf("%s: not decided after 3 s (counts %v)", g, n)
		}
	}
	if left != 0 {
		t.Errorf("%d twin groups still attached", left)
	}
	before, _ := s.Objects().ApiEntry.Stats()
	c, err := runFor(t, s, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := s.Objects().ApiEntry.Stats()
	reported, driver := 0, 0
	for _, e := range c.evs {
		if e.Kind != events.KindCall {
			continue
		}
		if a, ok := cudaapi.ByID(e.API); ok && twinGroup(a) != "" {
			reported++
			if a.Layer == cudaapi.LayerDriver {
				driver++
			}
		}
	}
	runs := after.RunCount - before.RunCount
	if reported < 300 || driver != 0 {
		t.Fatalf("%d copies, syncs and event calls reported in a second (%d by the driver), want the demo's ~600, all by the runtime", reported, driver)
	}
	// Entry runs also count memory calls; a twin still attached would
	// double the copies', syncs' and event calls'.
	if float64(runs) > 1.3*float64(reported) {
		t.Errorf("%d entry program runs for %d runtime calls: driver twins still trap", runs, reported)
	}
}

// TestTwinWindows: direct driver calls while the job sets up (NCCL
// connecting the ranks) only put the decision off; the loop's calls, all
// through the runtime, then detach the group. The counting is the
// session's own (countTwins), fed call events.
func TestTwinWindows(t *testing.T) {
	const pid = 42
	s := &Session{cfg: Config{Log: slog.New(slog.DiscardHandler)}, targets: map[int]*target{}, twinCalls: map[int]twinCounts{}}
	lib := &attachedLib{twins: map[string][]link.Link{"copies": nil}}
	s.targets[pid] = &target{pid: pid, libs: map[string]*attachedLib{"libcuda": lib}}
	s.twinCalls[pid] = twinCounts{"copies": &[2]uint64{}}
	call := func(name string, n int) []events.Event {
		a, ok := cudaapi.ByName(name)
		if !ok {
			t.Fatalf("no %s", name)
		}
		return slices.Repeat([]events.Event{{Kind: events.KindCall, PID: pid, API: a.ID}}, n)
	}
	s.countTwins(slices.Concat(call("cuMemcpyHtoDAsync_v2", 146), call("cudaMemcpyAsync", twinEvidence)))
	if n := s.twinCalls[pid]["copies"]; n == nil || *n != [2]uint64{} {
		t.Fatalf("after a window with 146 direct calls: counts %v, want a new window", n)
	}
	if _, ok := lib.twins["copies"]; !ok {
		t.Fatal("detached after a window with 146 direct calls")
	}
	s.countTwins(call("cudaMemcpyAsync", twinEvidence-1))
	if _, ok := lib.twins["copies"]; !ok {
		t.Fatal("detached before the window was full")
	}
	s.countTwins(slices.Concat(call("cuMemcpyAsync", 1), call("cudaMemcpyAsync", 1)))
	if n := s.twinCalls[pid]["copies"]; n != nil {
		t.Errorf("counts %v after a window of %d runtime calls and one direct, want the group detached", *n, twinEvidence)
	}
	if _, ok := lib.twins["copies"]; ok {
		t.Error("twin links still held after the group was detached")
	}
}
