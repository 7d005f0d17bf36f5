package probes

import (
	"errors"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/gpuprof/gpuprof/events"
)

// StackConfig says which stacks the session reads, for the profiles.
type StackConfig struct {
	// CPUHz samples the targets' threads on CPU this many times a second
	// of their CPU time (cpu-clock perf events, one per CPU); 0: none.
	CPUHz int
	// LaunchEvery reads the stacks of one kernel launch in this many,
	// while launches are counted (Sampling: --launch-duty); 0: none.
	LaunchEvery int
	// Calls reads the stacks of the syncs and copies that held their
	// thread CallMin or more.
	Calls   bool
	CallMin time.Duration
	// OffCPUHz samples the targets' threads' time off CPU this many
	// times a second of it (sched_switch and finish_task_switch); 0:
	// none.
	OffCPUHz int
}

// On says whether any stacks are read.
func (c StackConfig) On() bool { return c.CPUHz > 0 || c.LaunchEvery > 0 || c.Calls || c.OffCPUHz > 0 }

// OffPeriod is an off-CPU sample's period in ns of time off CPU.
func (c StackConfig) OffPeriod() uint64 {
	if c.OffCPUHz <= 0 {
		return 0
	}
	return uint64(time.Second) / uint64(c.OffCPUHz)
}

// Period is a CPU sample's period in ns of CPU time.
func (c StackConfig) Period() uint64 {
	if c.CPUHz <= 0 {
		return 0
	}
	return uint64(time.Second) / uint64(c.CPUHz)
}

// stackHeldMax bounds the stack samples held for the event loop: an event
// with 64 named frames is a few KB.
const stackHeldMax = 1 << 15

// stackSampler reads the stacks ring buffer, keeps the profiled map (the
// processes whose CPU samples the programs report) to the session's
// targets, and names each sample's frames. It is one of the session's
// controllers: tick follows the targets, forget drops a process.
type stackSampler struct {
	c      *core
	reader *ringbuf.Reader
	drain  *drainer
	cpus   []int       // the cpu-clock perf events, one per CPU
	off    []link.Link // the off-CPU programs' links
	syms   *symbolizer
	on     map[uint32]bool // the processes in the profiled map
}

// newStackSampler opens the stacks ring buffer and, for CPU samples, a
// cpu-clock perf event on every CPU running the cpu_sample program.
func newStackSampler(c *core) (*stackSampler, error) {
	rd, err := ringbuf.NewReader(c.objs.Stacks)
	if err != nil {
		return nil, fmt.Errorf("open stacks ring buffer: %w", err)
	}
	st := &stackSampler{c: c, reader: rd, syms: newSymbolizer(c.cfg.ProcRoot), on: map[uint32]bool{}}
	if period := c.cfg.Stacks.Period(); period > 0 {
		for cpu := range runtime.NumCPU() {
			fd, err := openCPUClock(cpu, period, c.objs.CpuSample.FD())
			if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENXIO) {
				continue // an offline CPU
			}
			if err != nil {
				st.close()
				return nil, fmt.Errorf("sample CPU %d (cpu-clock perf event): %w", cpu, err)
			}
			st.cpus = append(st.cpus, fd)
		}
	}
	if c.cfg.Stacks.OffPeriod() > 0 {
		if st.off, err = attachOffCPU(c); err != nil {
			st.close()
			return nil, err
		}
	}
	st.drain = newDrainer(rd, c.cfg.Poll, stackHeldMax, 0)
	return st, nil
}

// attachOffCPU attaches the off-CPU programs to the sched_switch and
// sys_exit tracepoints.
func attachOffCPU(c *core) ([]link.Link, error) {
	var links []link.Link
	for name, prog := range map[string]*ebpf.Program{"sched_switch": c.objs.OffcpuLeave, "sys_exit": c.objs.OffcpuReturn} {
		l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: name, Program: prog})
		if err != nil {
			for _, l := range links {
				l.Close()
			}
			return nil, fmt.Errorf("off-CPU samples: attach to the %s tracepoint: %w (turn them off with --profile-offcpu-hz 0)", name, err)
		}
		links = append(links, l)
	}
	return links, nil
}

// openCPUClock samples every task running on cpu, every period ns of
// its time there, with prog.
func openCPUClock(cpu int, period uint64, prog int) (int, error) {
	attr := unix.PerfEventAttr{
		Type:   unix.PERF_TYPE_SOFTWARE,
		Config: unix.PERF_COUNT_SW_CPU_CLOCK,
		Size:   uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Sample: period,
		Bits:   unix.PerfBitDisabled,
	}
	return openPerfBPF(&attr, -1, cpu, prog)
}

// take appends the samples read since the last take, named.
func (st *stackSampler) take(batch []events.Event, py *cpython) []events.Event {
	from := len(batch)
	batch, _, _, _ = st.drain.take(batch)
	now := time.Now()
	for i := from; i < len(batch); i++ {
		st.name(&batch[i], py, now)
	}
	return batch
}

// name names a sample's native frames and its Python frames' code
// objects; a frame that cannot be named stays an address.
func (st *stackSampler) name(ev *events.Event, py *cpython, now time.Time) {
	if len(ev.Native) > 0 {
		addrs := make([]uint64, len(ev.Native))
		for i, f := range ev.Native {
			addrs[i] = f.Offset
		}
		ev.Native = st.syms.frames(ev.PID, addrs, now)
	}
	if len(ev.Frames) > 0 {
		_, mem, _ := py.targetOf(ev.PID)
		if !nameFrames(mem, ev, now) {
			ev.Frames = nil
		}
	}
}

func (st *stackSampler) observe([]events.Event) {}

// tick keeps the profiled map to the targets (under the core's lock,
// which Detach's forget takes too, from Close's goroutines).
func (st *stackSampler) tick(time.Time) {
	if len(st.cpus) == 0 && len(st.off) == 0 {
		return
	}
	st.c.mu.Lock()
	defer st.c.mu.Unlock()
	for pid := range st.c.targets {
		if p := uint32(pid); !st.on[p] {
			if err := st.c.objs.Profiled.Put(p, uint8(1)); err != nil {
				st.c.cfg.Log.Warn("CPU samples of a process not read", "pid", pid, "err", err)
			}
			st.on[p] = true
		}
	}
}

func (st *stackSampler) forget(pid int) {
	p := uint32(pid)
	st.c.mu.Lock()
	if st.on[p] {
		st.c.objs.Profiled.Delete(p)
		delete(st.on, p)
	}
	st.c.mu.Unlock()
	st.syms.forget(p)
}

// close stops sampling and reading.
func (st *stackSampler) close() error {
	for _, fd := range st.cpus {
		unix.Close(fd)
	}
	st.cpus = nil
	for _, l := range st.off {
		l.Close()
	}
	st.off = nil
	err := st.reader.Close()
	if st.drain != nil {
		st.drain.stop()
	}
	return err
}
