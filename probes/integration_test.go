package probes

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/internal/testenv"
)

// demo wraps testenv.Demo with reading its truth log.
type demo struct{ *testenv.Demo }

func startDemo(t *testing.T, args ...string) demo { return demo{testenv.StartDemo(t, args...)} }

// truthSteps reads the demo's own log.
func (d demo) truthSteps(t *testing.T) []map[string]float64 {
	t.Helper()
	f, err := os.Open(d.Truth)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []map[string]float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]float64
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, m)
	}
	return rows
}

func (d demo) wait(t *testing.T, within time.Duration) { d.Wait(t, within) }

// collector runs a session and keeps its events.
type collector struct {
	mu       sync.Mutex
	evs      []events.Event
	attached []LibraryPlan
}

func (c *collector) sink(batch []events.Event, attached []LibraryPlan) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evs = append(c.evs, batch...)
	c.attached = append(c.attached, attached...)
}

// class returns the calls of one class, at whichever layer reported them
// (twins.go settles each class on one).
func (c *collector) class(cl cudaapi.Class) []events.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []events.Event
	for _, e := range c.evs {
		if a, ok := cudaapi.ByID(e.API); ok && e.Kind == events.KindCall && a.Class == cl {
			out = append(out, e)
		}
	}
	return out
}

func openSession(t *testing.T) *Session {
	t.Helper()
	testenv.RequireRoot(t)
	s, err := Open(DefaultConfig())
	if err != nil {
		t.Fatalf("open session: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openSessionWith opens a session with the user probes given.
func openSessionWith(t *testing.T, users ...UserProbe) *Session {
	t.Helper()
	testenv.RequireRoot(t)
	cfg := DefaultConfig()
	cfg.User = users
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("open session: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// wholeGetsProbe is the probe attach adds for --whole-gets, gpuprof's own.
func wholeGetsProbe(tb testing.TB, function string) UserProbe {
	u, err := ParseUserProbe("get=py:"+function, 0)
	if err != nil {
		tb.Fatal(err)
	}
	u.Default = true
	return u
}

// runFor runs the session until d passes or the targets exit.
func runFor(t testing.TB, s *Session, d time.Duration) (*collector, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	c := &collector{}
	err := s.Run(ctx, c.sink)
	return c, err
}

func TestAttachToRunningProcess(t *testing.T) {
	s := openSession(t)
	d := startDemo(t, "--steps", "150", "--start-delay", "0.3")
	waitForFile(t, d.PID(), "libcuda.so.1")
	plans, err := s.Attach(d.PID())
	if err != nil {
		t.Fatal(err)
	}
	layers := map[cudaapi.Layer]bool{}
	for _, p := range plans {
		layers[p.Layer] = true
		if n := len(p.SingleStepped()); n > 0 && p.Layer != cudaapi.LayerLoader {
			t.Errorf("%s: %d probes single-stepped; the stand-ins start with endbr64; push", p.File.Path, n)
		}
	}
	if !layers[cudaapi.LayerRuntime] || !layers[cudaapi.LayerDriver] || !layers[cudaapi.LayerLoader] {
		t.Fatalf("attached layers %v, want runtime, driver and loader", layers)
	}
	c, err := runFor(t, s, 30*time.Second)
	if !errors.Is(err, ErrTargetsExited) {
		t.Fatalf("Run = %v, want the target's exit", err)
	}
	d.wait(t, 5*time.Second)
	truth := d.truthSteps(t)

	// Every elapsed-time reading the demo took after attach is seen, once
	// (by the runtime's probes, then the driver's: twins.go), with the
	// float the demo received.
	reads := c.class(cudaapi.ClassElapsed)
	if len(reads) < 140 || len(reads) > len(truth) {
		t.Fatalf("saw %d elapsed-time reads, want the ~%d of the run", len(reads), len(truth))
	}
	last := truth[len(truth)-1]["compute_time"] * 1e3
	if got := reads[len(reads)-1].ElapsedMS(); math.Abs(got-last) > 1e-4 {
		t.Errorf("last reading %.6f ms, the demo logged %.6f ms", got, last)
	}
	// Event records are reported once, at entry (api_instant): two a
	// step, each with its start and end at one instant, and never again by
	// the driver's record underneath (the same event handle) while both
	// layers are probed.
	recs := c.class(cudaapi.ClassRecord)
	if len(recs) < 2*len(reads) || len(recs) > 2*len(reads)+4 {
		t.Errorf("%d event records reported for %d steps, want 2 a step", len(recs), len(reads))
	}
	for _, e := range recs {
		if e.Start != e.End || e.Start == 0 {
			t.Fatalf("event record from %d to %d, want one instant", e.Start, e.End)
		}
	}
	// Launches: 40 a step on the training thread, counted in the kernel.
	var launches uint64
	for _, e := range c.evs {
		if e.TID == reads[0].TID {
			launches += uint64(e.Launches)
		}
	}
	if want := uint64(40 * len(reads)); launches < want-40 || launches > want+80 {
		t.Errorf("training thread launches %d, want ~%d", launches, want)
	}
	// Copies carry direction and size.
	var h2d, d2h int
	for _, e := range c.class(cudaapi.ClassCopy) {
		switch {
		case e.Dir() == cudaapi.DirHtoD && e.Bytes() == 4<<20:
			h2d++
		case e.Dir() == cudaapi.DirDtoH && e.Bytes() == 4:
			d2h++
		}
	}
	if h2d < 2*len(reads) || d2h < len(reads) {
		t.Errorf("copies: %d h2d 4MiB, %d d2h 4B for %d steps", h2d, d2h, len(reads))
	}
	// Syncs block as long as the GPU work takes: loss.item()'s sync waits
	// for the step's compute.
	if st := s.Stats(); st.Lost() != 0 || st.StaleCalls != 0 {
		t.Errorf("stats %+v", st)
	}
}

// waitForFile waits until pid maps a file with this base name.
func waitForFile(t *testing.T, pid int, base string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		files, _ := ExecutableFiles("/proc", pid)
		for _, f := range files {
			if f.Base() == base {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("PID %d did not map %s", pid, base)
}

// waitForSteps waits until the demo has logged n steps.
func waitForSteps(t *testing.T, d demo, n int) {
	t.Helper()
	if got := testenv.WaitForLines(d.Truth, n, 10*time.Second, nil); got < n {
		t.Fatalf("the demo (PID %d) logged %d steps in 10 s, want %d", d.PID(), got, n)
	}
}

// probedBytes reads the first byte at each probe address in the target's
// memory: 0xcc (int3) while a uprobe is there.
func probedBytes(t *testing.T, pid int, plans []LibraryPlan) (int3, total int) {
	t.Helper()
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, lp := range plans {
		for _, p := range lp.Probes {
			addr, ok := mappedAddress(string(maps), lp.File.Path, p.Address())
			if !ok {
				continue
			}
			b := make([]byte, 1)
			if _, err := mem.ReadAt(b, int64(addr)); err != nil {
				t.Fatal(err)
			}
			total++
			if b[0] == 0xcc {
				int3++
			}
		}
	}
	return int3, total
}

// mappedAddress finds where a file offset of path is mapped.
func mappedAddress(maps, path string, off uint64) (uint64, bool) {
	for _, line := range strings.Split(maps, "\n") {
		var start, end, foff uint64
		var perms, dev, inode, p string
		if n, _ := fmt.Sscanf(line, "%x-%x %s %x %s %s %s", &start, &end, &perms, &foff, &dev, &inode, &p); n < 7 {
			continue
		}
		if p == path && off >= foff && off < foff+(end-start) {
			return start + off - foff, true
		}
	}
	return 0, false
}

func TestDetachLeavesTargetAsItWas(t *testing.T) {
	s := openSession(t)
	d := startDemo(t, "--steps", "300")
	pid := d.PID()
	waitForFile(t, pid, "libcuda.so.1")
	plans, err := s.Attach(pid)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runFor(t, s, time.Second); err != nil {
		t.Fatal(err)
	}
	// One layer's probes of a twin group may be gone already (twins.go).
	var kept []LibraryPlan
	s.mu.Lock()
	for _, p := range plans {
		rest, twins := splitTwins(p)
		for g, tp := range twins {
			if layer := s.twins.layers[pid][g]; layer == twinUndecided || keepsTwins(p.Layer, layer) {
				rest.Probes = append(rest.Probes, tp.Probes...)
			}
		}
		kept = append(kept, rest)
	}
	s.mu.Unlock()
	if n, total := probedBytes(t, pid, kept); n != total || total < 40 {
		t.Fatalf("while attached %d of %d probe addresses hold int3", n, total)
	}
	stepsBefore := len(d.truthSteps(t))
	if err := s.Detach(pid); err != nil {
		t.Fatal(err)
	}
	if n, total := probedBytes(t, pid, plans); n != 0 {
		t.Fatalf("after detach %d of %d probe addresses still hold int3", n, total)
	}
	d.wait(t, 30*time.Second)
	if got := len(d.truthSteps(t)); got != 300 || stepsBefore >= 300 {
		t.Fatalf("demo logged %d steps (%d before detach), want all 300 with some after detach", got, stepsBefore)
	}
}

func TestTargetExitsMidRun(t *testing.T) {
	s := openSession(t)
	d := startDemo(t, "--steps", "40")
	waitForFile(t, d.PID(), "libcuda.so.1")
	if _, err := s.Attach(d.PID()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c, err := runFor(t, s, 30*time.Second)
	if !errors.Is(err, ErrTargetsExited) {
		t.Fatalf("Run = %v after %v, want ErrTargetsExited", err, time.Since(start))
	}
	if len(c.class(cudaapi.ClassElapsed)) == 0 {
		t.Fatal("no events before the exit")
	}
	d.wait(t, 5*time.Second)
}

func TestLibraryLoadedAfterAttach(t *testing.T) {
	s := openSession(t)
	d := startDemo(t, "--steps", "60", "--load-delay", "1", "--start-delay", "0.1")
	pid := d.PID()
	waitForFile(t, pid, "demo-trainer")
	plans, err := s.Attach(pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plans {
		if p.Layer != cudaapi.LayerLoader {
			t.Fatalf("CUDA library %s attached before it was loaded", p.File.Path)
		}
	}
	if s.CUDALoaded(pid) {
		t.Fatal("CUDALoaded before the libraries were loaded")
	}
	c, err := runFor(t, s, 30*time.Second)
	if !errors.Is(err, ErrTargetsExited) {
		t.Fatal(err)
	}
	d.wait(t, 5*time.Second)
	layers := map[cudaapi.Layer]bool{}
	for _, p := range c.attached {
		layers[p.Layer] = true
	}
	if !layers[cudaapi.LayerRuntime] || !layers[cudaapi.LayerDriver] {
		t.Fatalf("after dlopen attached %v, want runtime and driver", layers)
	}
	// The loader hook attaches within milliseconds of the dlopen, before
	// a first step that comes 100 ms after it.
	if n := len(c.class(cudaapi.ClassElapsed)); n != 60 {
		t.Fatalf("saw %d of 60 steps' readings", n)
	}
}

func TestThreadStartedAfterAttach(t *testing.T) {
	s := openSession(t)
	d := startDemo(t, "--steps", "50", "--thread-delay", "1", "--engines", "0")
	pid := d.PID()
	waitForFile(t, pid, "libcuda.so.1")
	before := threads(t, pid)
	if _, err := s.Attach(pid); err != nil {
		t.Fatal(err)
	}
	c, err := runFor(t, s, 30*time.Second)
	if !errors.Is(err, ErrTargetsExited) {
		t.Fatal(err)
	}
	d.wait(t, 5*time.Second)
	reads := c.class(cudaapi.ClassElapsed)
	if len(reads) != 50 {
		t.Fatalf("saw %d of 50 readings", len(reads))
	}
	if before[reads[0].TID] {
		t.Fatalf("training thread %d existed at attach; the test needs it started later", reads[0].TID)
	}
}

func threads(t *testing.T, pid int) map[uint32]bool {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint32]bool{}
	for _, e := range ents {
		var tid uint32
		fmt.Sscan(e.Name(), &tid)
		out[tid] = true
	}
	return out
}

func TestAttachMissingPID(t *testing.T) {
	s := openSession(t)
	_, err := s.Attach(1 << 22)
	if err == nil || !strings.Contains(err.Error(), "no process with PID") {
		t.Fatalf("err = %v", err)
	}
}
