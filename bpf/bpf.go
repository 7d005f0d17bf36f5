package bpf

import (
	"cmp"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/gpuprof/gpuprof/events"
)

// Record types as laid out in gpuprof.bpf.c.
type (
	Event       = gpuprofEvent
	NameEvent   = gpuprofNameEvent
	SiteEvent   = gpuprofSiteEvent
	KernelKey   = gpuprofKernelKey
	PyLayout    = gpuprofPyLayout
	PyEvent     = gpuprofPyEvent
	StackEvent  = gpuprofStackEvent
	PoolWord    = gpuprofPoolWord
	PySiteKey   = gpuprofPySiteKey
	PySite      = gpuprofPySite
	PyAnchorKey = gpuprofPyAnchorKey
	WaitKey     = gpuprofWaitKey
	TwinKey     = gpuprofTwinKey
	WaitValue   = gpuprofWaitCount
	Objects     = gpuprofObjects
	Programs    = gpuprofPrograms
	Maps        = gpuprofMaps
	Variables   = gpuprofVariables
)

// Settings are the programs' load-time constants.
type Settings struct {
	// Features are what the session uses beyond the CUDA and loader
	// probes: the programs of the others return at once (features.go).
	Features Features

	WakeupBytes uint64 // data waiting in the ring buffer before the reader is woken
	PyMinWaitNS uint64 // Python lock waits shorter than this are not reported
	// PyLearnWaitNS: in a process whose layout says learning, waits from
	// this long on are reported too.
	PyLearnWaitNS uint64
	PyReadCookie  uint64 // the cookie of the wait probe on _Py_read
	CountWaits    bool   // count Python wait probe hits in WaitHits (~50 ns a hit)

	// Stack samples (the profiles): one launch in LaunchStackEvery has
	// its stacks read (0: none); syncs and copies that held their thread
	// StackCallMinNS or more do where StackCalls; a CPU sample carries
	// CPUPeriodNS, the period its perf events sample at.
	LaunchStackEvery uint32
	StackCalls       bool
	StackCallMinNS   uint64
	CPUPeriodNS      uint64
	// OffCPUPeriodNS samples the profiled threads' time off CPU, one
	// sample a period of it (0: none); under 2^32 (the programs draw a
	// 32-bit random number against it).
	OffCPUPeriodNS uint64
}

// Load loads the programs and maps into the kernel.
func Load(set Settings) (*Objects, error) {
	spec, err := loadSpec(set)
	if err != nil {
		return nil, err
	}
	leaveOut(spec, set)
	breakForTest(spec)
	var objs Objects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return nil, fmt.Errorf("load BPF objects: %w", err)
	}
	return &objs, nil
}

// loadSpec is the programs' spec with their load-time constants set.
func loadSpec(set Settings) (*ebpf.CollectionSpec, error) {
	if set.OffCPUPeriodNS >= 1<<32 {
		return nil, fmt.Errorf("off-CPU sampling period %d ns: must be under %d ns", set.OffCPUPeriodNS, uint64(1)<<32)
	}
	spec, err := loadGpuprof()
	if err != nil {
		return nil, fmt.Errorf("load BPF spec: %w", err)
	}
	if err := spec.Variables[gpuprofVarWakeupBytes].Set(set.WakeupBytes); err != nil {
		return nil, fmt.Errorf("set wakeup_bytes: %w", err)
	}
	if err := spec.Variables[gpuprofVarPyMinWaitNs].Set(set.PyMinWaitNS); err != nil {
		return nil, fmt.Errorf("set py_min_wait_ns: %w", err)
	}
	if err := spec.Variables[gpuprofVarPyLearnWaitNs].Set(set.PyLearnWaitNS); err != nil {
		return nil, fmt.Errorf("set py_learn_wait_ns: %w", err)
	}
	if err := spec.Variables[gpuprofVarPyReadCookie].Set(set.PyReadCookie); err != nil {
		return nil, fmt.Errorf("set py_read_cookie: %w", err)
	}
	if err := spec.Variables[gpuprofVarCountWaits].Set(set.CountWaits); err != nil {
		return nil, fmt.Errorf("set count_waits: %w", err)
	}
	for name, v := range map[string]any{gpuprofVarLaunchStackEvery: set.LaunchStackEvery,
		gpuprofVarStackCalls: set.StackCalls, gpuprofVarStackCallMinNs: set.StackCallMinNS,
		gpuprofVarCpuPeriodNs: set.CPUPeriodNS, gpuprofVarOffcpuPeriodNs: set.OffCPUPeriodNS} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("set %s: %w", name, err)
		}
	}
	// Not a setting: the bound the correlator joins a GIL wait to the
	// wait before it by, which the programs must report by too.
	if err := spec.Variables[gpuprofVarGilFollowNs].Set(uint64(events.GILFollowNS)); err != nil {
		return nil, fmt.Errorf("set gil_follow_ns: %w", err)
	}
	return spec, nil
}

// EnumValues are the values of one of gpuprof.bpf.c's enums by name, as
// the compiled object's BTF has them: for tests that hold a Go table to
// the C enum it follows (a new value must be in the table).
func EnumValues(enum string) (map[string]uint64, error) {
	spec, err := loadGpuprof()
	if err != nil {
		return nil, err
	}
	var e *btf.Enum
	if err := spec.Types.TypeByName(enum, &e); err != nil {
		return nil, fmt.Errorf("enum %s: %w", enum, err)
	}
	out := map[string]uint64{}
	for _, v := range e.Values {
		out[v.Name] = v.Value
	}
	return out, nil
}

// RingbufSize is the size of the events ring buffer in bytes.
func RingbufSize() (uint32, error) {
	spec, err := loadGpuprof()
	if err != nil {
		return 0, err
	}
	return spec.Maps[gpuprofMapEvents].MaxEntries, nil
}

// ProgramStat is how often one program ran and for how long in all, as
// the kernel counts with BPF statistics on (EnableStats).
type ProgramStat struct {
	Name    string
	Runs    uint64
	Runtime time.Duration
	Trap    Trap // what each run cost the probed thread besides the run
}

// Trap is what brings a program to run: a breakpoint the probed thread
// trapped into, at a function's entry or its return, or none of the
// thread's own (a tracepoint, a perf event).
type Trap uint8

const (
	TrapNone   Trap = iota
	TrapEntry       // a uprobe's breakpoint
	TrapReturn      // a uretprobe's, at the return trampoline
)

// What a trap costs the probed thread on the GPU host, besides the
// program's run (FACTS.md §2: a uprobe on a `push %rbp` 670 ns, with its
// return probe 1,020 ns): a floor, as a first instruction the kernel
// single-steps rather than emulates costs ~5,500 ns.
const (
	EntryTrapCost  = 670 * time.Nanosecond
	ReturnTrapCost = 350 * time.Nanosecond
)

// Cost is what the runs cost the probed threads at least: each run's own
// time and its trap's.
func (s ProgramStat) Cost() time.Duration {
	trap := time.Duration(0)
	switch s.Trap {
	case TrapEntry:
		trap = EntryTrapCost
	case TrapReturn:
		trap = ReturnTrapCost
	}
	return s.Runtime + time.Duration(s.Runs)*trap
}

// trapOf is the trap of a program of section sec.
func trapOf(sec string) Trap {
	switch {
	case strings.HasPrefix(sec, "uretprobe"):
		return TrapReturn
	case strings.HasPrefix(sec, "uprobe"):
		return TrapEntry
	}
	return TrapNone
}

// EnableStats turns on the kernel's BPF run-time statistics until the
// returned closer is closed (they cost ~20 ns a program run).
func EnableStats() (io.Closer, error) {
	c, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return nil, fmt.Errorf("enable BPF statistics: %w", err)
	}
	return c, nil
}

// ProgramStats returns each program's runs and run time so far, most run
// first. The programs are read off the generated struct's tags, so that a
// program added to gpuprof.bpf.c is counted without a list to keep.
func (o *Objects) ProgramStats() []ProgramStat {
	var out []ProgramStat
	spec, err := loadGpuprof() // the programs' sections: embedded, cannot fail once loaded
	if err != nil {
		return nil
	}
	progs := reflect.ValueOf(o.gpuprofPrograms)
	for i := range progs.NumField() {
		p, ok := progs.Field(i).Interface().(*ebpf.Program)
		if !ok || p == nil {
			continue
		}
		ps, err := p.Stats()
		if err != nil || ps.RunCount == 0 {
			continue
		}
		name := progs.Type().Field(i).Tag.Get("ebpf")
		st := ProgramStat{Name: name, Runs: ps.RunCount, Runtime: ps.Runtime}
		if prog := spec.Programs[name]; prog != nil {
			st.Trap = trapOf(prog.SectionName)
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b ProgramStat) int { return cmp.Compare(b.Runs, a.Runs) })
	return out
}

// WaitCount is how often one process's threads (its main thread, or the
// others) entered one Python wait function, and how many of those calls
// waited long enough to be reported with their frames.
type WaitCount struct {
	PID      uint32
	Cookie   uint16 // the wait function (probes.WaitFunc)
	Main     bool
	Hits     uint64
	Reported uint64
}

// WaitCounts sums the wait_hits map over CPUs, most hits first. It is
// empty unless Settings.CountWaits was set.
func (o *Objects) WaitCounts() ([]WaitCount, error) {
	var (
		key  WaitKey
		vals []WaitValue
		out  []WaitCount
	)
	it := o.WaitHits.Iterate()
	for it.Next(&key, &vals) {
		c := WaitCount{PID: key.Pid, Cookie: key.Cookie, Main: key.Main != 0}
		for _, v := range vals {
			c.Hits += v.Hits
			c.Reported += v.Reported
		}
		out = append(out, c)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read wait counts: %w", err)
	}
	slices.SortFunc(out, func(a, b WaitCount) int { return cmp.Compare(b.Hits, a.Hits) })
	return out, nil
}

// TwinCounts returns, for one process, how many calls of each driver entry
// point (by API ID) were made underneath a runtime call of the same kind
// (a copy under a copy, a record under a record).
func (o *Objects) TwinCounts(pid uint32) (map[uint16]uint64, error) {
	var (
		key  TwinKey
		vals []uint64
	)
	out := map[uint16]uint64{}
	it := o.TwinHits.Iterate()
	for it.Next(&key, &vals) {
		if key.Pid != pid {
			continue
		}
		for _, v := range vals {
			out[key.Api] += v
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read twin counts: %w", err)
	}
	return out, nil
}

// RaiseRuntimeGeneration ends every runtime call of the given twin groups
// (their COOKIE_TWIN codes) that the programs hold as in flight: the
// groups' runtime probes were detached, and those calls' returns will not
// be seen. Calls of other groups stay in flight.
func (o *Objects) RaiseRuntimeGeneration(twins ...uint64) error {
	gen, err := o.RuntimeGenerations()
	if err != nil {
		return err
	}
	for _, g := range twins {
		if g == 0 || g >= uint64(len(gen)) {
			return fmt.Errorf("raise rt_gen: no twin group %d", g)
		}
		gen[g]++
	}
	if err := o.RtGen.Set(gen); err != nil {
		return fmt.Errorf("set rt_gen: %w", err)
	}
	return nil
}

// RuntimeGenerations are the runtime calls' generations by twin group
// (index: COOKIE_TWIN code).
func (o *Objects) RuntimeGenerations() ([CookieTwinMask + 1]uint64, error) {
	var gen [CookieTwinMask + 1]uint64
	if err := o.RtGen.Get(&gen); err != nil {
		return gen, fmt.Errorf("read rt_gen: %w", err)
	}
	return gen, nil
}

// ForgetTwins drops a process's twin counts (it was detached).
func (o *Objects) ForgetTwins(pid uint32) {
	hits, _ := o.TwinCounts(pid)
	for api := range hits {
		o.TwinHits.Delete(TwinKey{Pid: pid, Api: api})
	}
}

// SetPyLearning tells the wait programs how many processes have their
// short waits reported (PyLayout.Learning), 0 for none.
func (o *Objects) SetPyLearning(n int) error {
	if err := o.PyLearning.Set(uint64(n)); err != nil {
		return fmt.Errorf("set py_learning: %w", err)
	}
	return nil
}

// Loss is one record kind's drops on one CPU for want of room in the
// events ring buffer (gpuprof.bpf.c's struct loss): Count all of them,
// the latest run of them (Run drops from FirstNs to LastNs, none further
// apart than the C side's LOSS_GAP_NS).
type Loss = gpuprofLoss
