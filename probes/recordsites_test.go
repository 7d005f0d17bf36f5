package probes

import (
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// runUntilRecords runs s in short spans until ok holds for pid's record
// watch, failing after within.
func runUntilRecords(t *testing.T, s *Session, pid int, within time.Duration, what string, ok func(w *recordWatch) bool) {
	t.Helper()
	for end := time.Now().Add(within); ; {
		s.mu.Lock()
		w := s.records.watches[pid]
		done := w != nil && ok(w)
		s.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("not %s within %v", what, within)
		}
		if _, err := runFor(t, s, 250*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
}

// recordCalls splits c's runtime records by function, and counts those
// carrying a caller (seen at a function's entry) and the elapsed-time reads.
func recordCalls(c *collector) (byAPI map[string]int, withCaller, reads int) {
	byAPI = map[string]int{}
	for _, e := range c.evs {
		a, ok := cudaapi.ByID(e.API)
		if e.Kind != events.KindCall || !ok {
			continue
		}
		switch a.Class {
		case cudaapi.ClassRecord:
			byAPI[a.Name]++
			if e.Caller() != 0 {
				withCaller++
			}
		case cudaapi.ClassElapsed:
			reads++
		}
	}
	return byAPI, withCaller, reads
}

// TestRecordsNarrowToReadSites: the demo times each step with two records
// and an elapsed-time read, and makes 30 records a step from a call site of
// its own that it never reads (a library's, as DDP's and NCCL's). Once
// NarrowRecords is called, the library's records go unprobed (no trap: the
// entry program runs once a reported record), the timing records come from
// probes on their call instructions (through the demo's table of function
// pointers, call *disp(%rip)); when the demo begins reading the library's
// events, the record function is probed again.
func TestRecordsNarrowToReadSites(t *testing.T) {
	s := openSession(t)
	st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		t.Fatalf("BPF statistics: %v", err)
	}
	defer st.Close()
	// ~100 steps a second: the library's events are read from ~11 s on.
	layers := settledTwins(t, s, "--steps", "3000", "--start-delay", "0.3", "--direct-records", "20",
		"--library-records", "30", "--read-library-from", "1100")
	if layers[twinEvents] != twinRuntime {
		t.Fatalf("event calls settled on %v, want the runtime's", layers[twinEvents])
	}
	var pid int
	s.mu.Lock()
	for p := range s.targets {
		pid = p
	}
	s.mu.Unlock()
	s.records.Narrow(pid)
	runUntilRecords(t, s, pid, 6*time.Second, "narrowed", func(w *recordWatch) bool { return w.narrowed })
	s.closer.wait()                                               // the functions' probes closed
	if _, err := runFor(t, s, 200*time.Millisecond); err != nil { // what they reported before
		t.Fatal(err)
	}
	before, _ := s.objs.ApiInstant.Stats()
	c, err := runFor(t, s, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := s.objs.ApiInstant.Stats()
	byAPI, withCaller, reads := recordCalls(c)
	timing, library := byAPI["cudaEventRecordWithFlags"], byAPI["cudaEventRecord"]
	if reads < 30 || reads > 130 || timing < 2*reads-2 || library != 0 || withCaller != 0 {
		t.Errorf("narrowed, in a second: %d elapsed-time reads, %d timing and %d library records (%d with a caller); want the demo's ~100 steps' reads, two timing records a read from the call sites, no library record",
			reads, timing, library, withCaller)
	}
	if runs := after.RunCount - before.RunCount; float64(runs) > 1.3*float64(timing+library) {
		t.Errorf("%d entry-only program runs for %d records: the library's records still trap", runs, timing+library)
	}
	s.mu.Lock()
	sites := len(s.targets[pid].recordSites)
	s.mu.Unlock()
	if sites != 1 {
		t.Errorf("%d call-site links, want one (the demo's two timing records' call sites, in one file)", sites)
	}

	runUntilRecords(t, s, pid, 12*time.Second, "probed at the function again", func(w *recordWatch) bool { return w.widenings == 1 })
	s.closer.wait()
	if _, err := runFor(t, s, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	c, err = runFor(t, s, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	byAPI, withCaller, _ = recordCalls(c)
	if library := byAPI["cudaEventRecord"]; library < 1000 || withCaller < library {
		t.Errorf("widened, in a second: %d library records, %d with a caller; want the demo's 30 a step, from the function's probe", library, withCaller)
	}
	s.mu.Lock()
	sites = len(s.targets[pid].recordSites)
	s.mu.Unlock()
	if sites != 0 {
		t.Errorf("%d call-site links left once the function is probed again", sites)
	}
}

// TestRecordWatch: which callers' records stay probed, and when reads of
// events recorded elsewhere bring the functions' probes back, as a DDP
// rank's calls would make them: the loop's two timing records and their
// reading a step, 34 records a step from the call site DDP's sampled
// timings share (read 4 times in 100 steps), 17 never read.
func TestRecordWatch(t *testing.T) {
	rec, _ := cudaapi.ByName("cudaEventRecordWithFlags")
	read, _ := cudaapi.ByName("cudaEventElapsedTime")
	const loop, shared, never = 0x1000, 0x2000, 0x3000
	record := func(w *recordWatch, caller, handle uint64) {
		w.note(&events.Event{Kind: events.KindCall, API: rec.ID, Out: caller, Args: [5]uint64{handle}}, rec.Class)
	}
	elapsed := func(w *recordWatch, a, b uint64) {
		w.note(&events.Event{Kind: events.KindCall, API: read.ID, Args: [5]uint64{0, a, b}}, read.Class)
	}
	w := newRecordWatch(time.Now(), 0)
	for i := range 300 {
		record(w, loop, 0xe1)
		for j := range 34 {
			record(w, shared, 0xd0+uint64(j%4))
		}
		for range 17 {
			record(w, never, 0xc0)
		}
		record(w, loop, 0xe2)
		elapsed(w, 0xe1, 0xe2)
		if i%100 == 0 {
			elapsed(w, 0xd0, 0xd1)
			elapsed(w, 0xd2, 0xd3)
		}
	}
	for caller, want := range map[uint64]bool{loop: true, shared: false, never: false} {
		if got := w.kept(w.sites[caller]); got != want {
			t.Errorf("caller %#x (%+v): kept %v, want %v", caller, *w.sites[caller], got, want)
		}
	}

	// A loop that times itself through the helper its libraries record
	// through (at::cuda::CUDAEvent::record from C++): 2 of its 102
	// records a step are read, every step.
	helper := newRecordWatch(time.Now(), 0)
	for range 100 {
		record(helper, shared, 0xe1)
		for range 100 {
			record(helper, shared, 0xd0)
		}
		record(helper, shared, 0xe2)
		elapsed(helper, 0xe1, 0xe2)
	}
	if !helper.kept(helper.sites[shared]) {
		t.Errorf("the loop's own timing records not kept where a library shares their call site: %+v", *helper.sites[shared])
	}

	// Narrowed to the loop's call site: DDP's readings miss 1 in ~25.
	w.narrowed, w.keep, w.recorded = true, map[uint64]bool{loop: true}, map[uint64]bool{}
	for i := range 400 {
		record(w, 0, 0xe1)
		record(w, shared, 0xd0) // in flight from the functions' probes: no sign of a kept site
		record(w, 0, 0xe2)
		elapsed(w, 0xe1, 0xe2)
		if i%25 == 0 {
			elapsed(w, 0xd0, 0xd1)
		}
	}
	if w.widen {
		t.Fatal("widened by DDP's sampled readings")
	}
	// The loop begins reading a library's events every step.
	for range 40 {
		record(w, 0, 0xe1)
		record(w, 0, 0xe2)
		elapsed(w, 0xe1, 0xe2)
		elapsed(w, 0xd0, 0xd1)
	}
	if !w.widen {
		t.Error("not widened by a new reading every step")
	}
}
