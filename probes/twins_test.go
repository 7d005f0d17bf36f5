package probes

import (
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/gpuprof/gpuprof/bpf"
	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// twinGroups are every twin group.
var twinGroups = []string{twinCopies, twinSyncs, twinEvents}

func TestTwinVerdict(t *testing.T) {
	for _, c := range []struct {
		group                       string
		runtime, direct, seen, read uint64
		undirected                  bool
		want                        twinLayer
	}{
		{runtime: twinEvidence - 1, seen: twinEvidence - 1},               // too soon
		{runtime: twinEvidence, seen: twinEvidence, want: twinDriver},     // every runtime call reached the driver
		{runtime: 1000, seen: 990, want: twinDriver},                      // events not all read yet
		{runtime: 1000, seen: 900, want: twinRuntime},                     // some reached no probed driver call
		{runtime: 1000, seen: 1000, undirected: true, want: twinRuntime},  // copies the driver cannot tell the direction of
		{runtime: 1000, direct: 10, want: twinRuntime},                    // NCCL's odd direct call
		{runtime: 1000, direct: 11, want: twinRestart},                    // a JAX-like share
		{runtime: 1000, direct: 11, seen: 1000, want: twinDriver},         // the driver sees them all anyway
		{runtime: twinEvidence, direct: 146, want: twinRestart},           // NCCL connecting DDP's ranks: try again
		{runtime: twinEvidence - 1, direct: 5000, seen: twinEvidence - 1}, // driver-only so far: wait
		// A DDP rank: NCCL's own records outnumber torch's, no elapsed-time read among them.
		{group: twinEvents, runtime: 1000, direct: 1300, seen: 1000, want: twinRuntime},
		{group: twinEvents, runtime: 1000, direct: 1300, seen: 1000, read: 1, want: twinDriver}, // something times itself there
		{group: twinEvents, runtime: 1000, direct: 10, seen: 1000, want: twinDriver},            // as cheap at either layer
		{group: twinCopies, runtime: 1000, direct: 1300, seen: 1000, want: twinDriver},          // direct copies may be a step's data
	} {
		n := twinTally{window: [2]uint64{c.runtime, c.direct}, runtime: c.runtime, directReads: c.read}
		if got := twinVerdict(c.group, n, c.seen, c.undirected); got != c.want {
			t.Errorf("%q: runtime %d, direct %d (%d reads), seen %d, undirected %v: %v, want %v",
				c.group, c.runtime, c.direct, c.read, c.seen, c.undirected, got, c.want)
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
	want := map[string]int{twinCopies: 2, twinSyncs: 1, twinEvents: 2}
	for g, n := range want {
		if got := len(twins[g].Probes); got != n || twins[g].Layer != cudaapi.LayerDriver {
			t.Errorf("group %s: %v, want %d probes", g, names(twins[g]), n)
		}
	}
	lp.Layer = cudaapi.LayerLoader
	if rest, twins := splitTwins(lp); len(twins) != 0 || len(rest.Probes) != len(lp.Probes) {
		t.Errorf("a loader plan was split: %d twins", len(twins))
	}
}

// settledTwins starts the demo with args, attaches to it, and returns
// its twin groups' layers 3 s later (long enough for ~200 stream syncs,
// one a step), failing where a group is still undecided.
func settledTwins(t *testing.T, s *Session, args ...string) map[string]twinLayer {
	t.Helper()
	d := startDemo(t, args...)
	waitForFile(t, d.PID(), "libcuda.so.1")
	if _, err := s.Attach(d.PID()); err != nil {
		t.Fatal(err)
	}
	if _, err := runFor(t, s, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	counts, layers := s.twins.calls[d.PID()], s.twins.layers[d.PID()]
	for _, g := range twinGroups {
		if n, ok := counts[g]; !ok || n != nil {
			t.Errorf("%s: undecided after 3 s (counts %v)", g, n)
		}
	}
	for _, l := range s.targets[d.PID()].libs {
		if len(l.twins) != 0 {
			t.Errorf("%s: twin groups %v still attached apart", l.plan.File.Path, slices.Collect(maps.Keys(l.twins)))
		}
	}
	return maps.Clone(layers)
}

// twinCalls counts the copies, syncs and event calls reported in c, in
// all and by the runtime's probes, and the calls of api.
func twinCalls(c *collector, api string) (reported, runtime, of int) {
	for _, e := range c.evs {
		a, ok := cudaapi.ByID(e.API)
		if e.Kind != events.KindCall || !ok || twinGroup(a) == "" {
			continue
		}
		reported++
		if a.Layer == cudaapi.LayerRuntime {
			runtime++
		}
		if a.Name == api {
			of++
		}
	}
	return reported, runtime, of
}

// TestTwinsSettleOnTheDriver: the demo's copies (each with its
// direction), syncs and event calls all reach the driver under the
// runtime, so once it has made enough of each the runtime's probes of
// them go, the driver's report every one, and a call runs one entry
// program, not two.
func TestTwinsSettleOnTheDriver(t *testing.T) {
	s := openSession(t)
	st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		t.Fatalf("BPF statistics: %v", err)
	}
	defer st.Close()
	layers := settledTwins(t, s, "--steps", "600", "--start-delay", "0.3")
	for _, g := range twinGroups {
		if layers[g] != twinDriver {
			t.Errorf("%s: %v, want the driver's", g, layers[g])
		}
	}
	objs := s.objs
	before, _ := objs.ApiEntry.Stats()
	beforeInstant, _ := objs.ApiInstant.Stats()
	c, err := runFor(t, s, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := objs.ApiEntry.Stats()
	afterInstant, _ := objs.ApiInstant.Stats()
	reported, runtime, _ := twinCalls(c, "")
	if reported < 300 || runtime != 0 {
		t.Fatalf("%d copies, syncs and event calls reported in a second (%d by the runtime), want the demo's ~600, all by the driver", reported, runtime)
	}
	// Entry runs also count memory calls; a runtime probe still attached
	// would double the copies', syncs' and event calls'.
	runs := after.RunCount - before.RunCount + afterInstant.RunCount - beforeInstant.RunCount
	if float64(runs) > 1.3*float64(reported) {
		t.Errorf("%d entry program runs for %d calls: the runtime's probes still trap", runs, reported)
	}
}

// TestLibraryRecordsSettleOnTheRuntime: the demo with 20 event records a
// step made straight to the driver, as NCCL's own runtime makes around
// each collective. Its event calls settle on the runtime, whose probes
// time its own records and elapsed-time reads, and the direct records go
// unseen, while its copies and syncs settle on the driver as before.
func TestLibraryRecordsSettleOnTheRuntime(t *testing.T) {
	s := openSession(t)
	layers := settledTwins(t, s, "--steps", "600", "--start-delay", "0.3", "--direct-records", "20")
	want := map[string]twinLayer{twinCopies: twinDriver, twinSyncs: twinDriver, twinEvents: twinRuntime}
	for g, l := range want {
		if layers[g] != l {
			t.Errorf("%s: %v, want %v", g, layers[g], l)
		}
	}
	c, err := runFor(t, s, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, _, records := twinCalls(c, "cudaEventRecordWithFlags")
	_, _, reads := twinCalls(c, "cudaEventElapsedTime")
	_, _, direct := twinCalls(c, "cuEventRecord")
	// ~100 steps a second: two records and a read each, and 20 direct.
	if reads < 30 || records < 2*reads-2 || direct != 0 {
		t.Errorf("in a second: %d runtime records, %d elapsed-time reads, %d direct records; want two records a read, no direct record", records, reads, direct)
	}
}

// TestRaisedGenerationKeepsOtherGroupsInFlight: the copies' runtime
// generation raised (as when their runtime probes go) again and again
// while the demo's elapsed-time reads sit in the runtime, their driver
// twins still to come (the stand-in runtime sleeps before it reaches the
// driver). The reads stay in flight: their twins are counted under them,
// never reported as reads made straight to the driver. With one generation
// for every group, one such read decided CI's
// TestLibraryRecordsSettleOnTheRuntime for the driver.
func TestRaisedGenerationKeepsOtherGroupsInFlight(t *testing.T) {
	t.Setenv("GPUPROF_STANDIN_READ_DELAY_US", "30000") // ~3/4 of each step
	s := openSession(t)
	d := startDemo(t, "--steps", "200", "--start-delay", "0.3")
	waitForFile(t, d.PID(), "libcuda.so.1")
	if _, err := s.Attach(d.PID()); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	raised := make(chan error, 1)
	go func() {
		tick := time.NewTicker(70 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				raised <- nil
				return
			case <-tick.C:
				if err := s.objs.RaiseRuntimeGeneration(twinGroupCode(twinCopies)); err != nil {
					raised <- err
					return
				}
			}
		}
	}()
	c, err := runFor(t, s, 1500*time.Millisecond)
	close(done)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-raised; err != nil {
		t.Fatal(err)
	}
	// From the first read whose entry was seen: a read in flight as the
	// probes were attached has its twin reported, rightly.
	var first uint64
	reads, direct := 0, 0
	for _, e := range c.evs {
		a, ok := cudaapi.ByID(e.API)
		if e.Kind != events.KindCall || !ok || a.Class != cudaapi.ClassElapsed {
			continue
		}
		switch {
		case a.Layer == cudaapi.LayerRuntime:
			reads++
			if first == 0 || e.Start < first {
				first = e.Start
			}
		case a.Layer == cudaapi.LayerDriver && first != 0 && e.Start > first:
			direct++
		}
	}
	if reads < 10 || direct != 0 {
		t.Errorf("%d runtime elapsed-time reads, %d driver reads after the first, as the copies' generation was raised every 70 ms; want ~30 and none", reads, direct)
	}
}

// TestDirectReadsFromTheAttach: a job attached mid-run, whose direct
// records (a library's own, as NCCL's) leave its event calls to the
// runtime. Its reads are the runtime's, but at the attach two kinds of
// them reach the driver with no runtime call seen around them, and
// counted as reads made straight to the driver they kept the event calls
// on the driver (NCCL's records probed there, ~51 traps a step on each
// DDP rank, for the whole attach):
//   - "between": reads made after the driver's probes went in and before
//     the runtime's (the stand-in's driver is attached first, as on the
//     GPU host); 8 attaches in 10 before the fix;
//   - "in flight": a read the stand-in runtime holds for ~3/4 of each
//     step before it reaches the driver, so that the attach most often
//     lands in one; 8 in 8.
func TestDirectReadsFromTheAttach(t *testing.T) {
	for _, c := range []struct {
		name, delayUS, steps string
	}{
		{"between", "0", "2000"},      // ~10 ms a step
		{"in flight", "30000", "300"}, // ~40 ms a step
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("GPUPROF_STANDIN_READ_DELAY_US", c.delayUS)
			s := openSession(t)
			d := startDemo(t, "--steps", c.steps, "--direct-records", "20")
			waitForSteps(t, d, 3)
			if _, err := s.Attach(d.PID()); err != nil {
				t.Fatal(err)
			}
			// Three runtime event calls a step: twinEvidence of them
			// in 2.7 s at most.
			if _, err := runFor(t, s, 4*time.Second); err != nil {
				t.Fatal(err)
			}
			s.mu.Lock()
			n, layer := s.twins.calls[d.PID()][twinEvents], s.twins.layers[d.PID()][twinEvents]
			s.mu.Unlock()
			if n != nil || layer != twinRuntime {
				t.Errorf("event calls: %v (counts %+v), want the runtime's", layer, n)
			}
		})
	}
}

// TestTwinTallyFromTheAttach: what counts as a call straight to the
// driver. Driver calls from before the runtime's probes went in may be
// the twins of runtime calls no probe saw enter, and a thread's first
// event call after may be one still in flight; neither is evidence.
func TestTwinTallyFromTheAttach(t *testing.T) {
	read := func(name string, tid uint32, start uint64) *events.Event {
		a, ok := cudaapi.ByName(name)
		if !ok {
			t.Fatalf("no %s", name)
		}
		return &events.Event{Kind: events.KindCall, API: a.ID, TID: tid, Start: start}
	}
	n := &twinTally{}
	c := twinCounts{twinEvents: n}
	c.count(read("cuEventElapsedTime_v2", 1, 50), false)
	if n.window[1] != 0 {
		t.Errorf("a driver read with no runtime probes in: %+v, want it not counted", n)
	}
	n.since = 100
	for _, ev := range []*events.Event{
		read("cuEventElapsedTime_v2", 1, 99),  // before the runtime's probes went in
		read("cuEventElapsedTime_v2", 2, 150), // thread 2's first: maybe a read in flight
		read("cudaEventElapsedTime", 3, 160),  // thread 3 seen in the runtime
		read("cuEventRecord", 4, 170),         // thread 4's first: a record
	} {
		c.count(ev, false)
	}
	if n.window != [2]uint64{1, 2} || n.directReads != 0 {
		t.Errorf("counts %+v, want 1 runtime call, 2 direct, no direct read", n)
	}
	for _, tid := range []uint32{2, 3, 4} {
		c.count(read("cuEventElapsedTime_v2", tid, 200), false)
	}
	if n.directReads != 3 {
		t.Errorf("%d direct reads on threads already seen, want 3", n.directReads)
	}
}

// TestTwinWindows: the session's own counting (countTwins, decideTwins)
// fed call events for a process that is not there. Direct driver calls
// while the job sets up (NCCL connecting the ranks) only put the decision
// off; a window with few keeps the runtime's probes where the driver was
// not seen under them, and the driver's where it was (its counts written
// into the programs' map here).
func TestTwinWindows(t *testing.T) {
	call := func(name string, pid, n int) []events.Event {
		a, ok := cudaapi.ByName(name)
		if !ok {
			t.Fatalf("no %s", name)
		}
		return slices.Repeat([]events.Event{{Kind: events.KindCall, PID: uint32(pid), API: a.ID, Start: 1}}, n)
	}
	s := openSession(t)
	s.cfg.Log = slog.New(slog.DiscardHandler)
	fake := func(pid int) (rt, drv *attachedLib) {
		rt = &attachedLib{plan: LibraryPlan{Layer: cudaapi.LayerRuntime}, twins: map[string][]link.Link{twinCopies: nil}}
		drv = &attachedLib{plan: LibraryPlan{Layer: cudaapi.LayerDriver}, twins: map[string][]link.Link{twinCopies: nil}}
		s.mu.Lock()
		s.targets[pid] = &target{pid: pid, libs: map[string]*attachedLib{"libcudart": rt, "libcuda": drv}}
		s.twins.calls[pid] = twinCounts{twinCopies: &twinTally{since: 1}}
		s.mu.Unlock()
		return rt, drv
	}
	defer func() {
		s.mu.Lock()
		clear(s.targets)
		s.mu.Unlock()
	}()

	const setup = 1 << 22 // pids no process has
	_, drv := fake(setup)
	s.twins.observe(slices.Concat(call("cuMemcpyHtoDAsync_v2", setup, 146), call("cudaMemcpyAsync", setup, twinEvidence)))
	if n := s.twins.calls[setup][twinCopies]; n == nil || n.window != [2]uint64{} || n.runtime != twinEvidence {
		t.Fatalf("after a window with 146 direct calls: counts %+v, want a new window", n)
	}
	s.twins.observe(call("cudaMemcpyAsync", setup, twinEvidence-1))
	if _, ok := drv.twins[twinCopies]; !ok {
		t.Fatal("decided before the window was full")
	}
	s.twins.observe(slices.Concat(call("cuMemcpyAsync", setup, 1), call("cudaMemcpyAsync", setup, 1)))
	if n := s.twins.calls[setup][twinCopies]; n != nil || s.twins.layers[setup][twinCopies] != twinRuntime {
		t.Errorf("counts %+v, layer %v after a window of %d runtime calls and one direct, want the runtime's", n, s.twins.layers[setup][twinCopies], twinEvidence)
	}
	if len(drv.twins) != 0 {
		t.Error("twin links still held after the group was decided")
	}

	// The driver was seen under every runtime copy, with their directions.
	const seen = setup + 1
	rt, _ := fake(seen)
	a, _ := cudaapi.ByName("cuMemcpyHtoDAsync_v2")
	perCPU := make([]uint64, ebpf.MustPossibleCPU())
	perCPU[0] = twinEvidence
	objs := s.objs
	if err := objs.TwinHits.Put(bpf.TwinKey{Pid: seen, Api: a.ID}, perCPU); err != nil {
		t.Fatal(err)
	}
	defer objs.ForgetTwins(seen)
	gen0, err := objs.RuntimeGenerations()
	if err != nil {
		t.Fatal(err)
	}
	s.twins.observe(call("cudaMemcpyAsync", seen, twinEvidence))
	s.closer.wait() // the generation is raised once the runtime's links are closed
	gen1, err := objs.RuntimeGenerations()
	if err != nil {
		t.Fatal(err)
	}
	if s.twins.layers[seen][twinCopies] != twinDriver || len(rt.twins) != 0 {
		t.Errorf("layer %v, runtime twins %v, want the driver's", s.twins.layers[seen][twinCopies], rt.twins)
	}
	// Only the copies' generation: an elapsed-time read in flight stays in
	// flight (TestRaisedGenerationKeepsOtherGroupsInFlight).
	want := gen0
	want[twinGroupCode(twinCopies)]++
	if gen1 != want {
		t.Errorf("runtime generations %v after %v, want the copies' raised once as the runtime's probes went, no other", gen1, gen0)
	}

	// A copy the driver saw with no direction keeps the runtime's probes.
	const undirected = setup + 2
	fake(undirected)
	g, _ := cudaapi.ByName("cuMemcpyAsync")
	if err := objs.TwinHits.Put(bpf.TwinKey{Pid: undirected, Api: g.ID}, perCPU); err != nil {
		t.Fatal(err)
	}
	defer objs.ForgetTwins(undirected)
	s.twins.observe(call("cudaMemcpyAsync", undirected, twinEvidence))
	if s.twins.layers[undirected][twinCopies] != twinRuntime {
		t.Errorf("layer %v with undirected driver copies, want the runtime's", s.twins.layers[undirected][twinCopies])
	}
}
