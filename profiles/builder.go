package profiles

import (
	"slices"

	"github.com/google/pprof/profile"
)

// Type is a profile type.
type Type string

const (
	TypeCPU  Type = "cpu"  // process_cpu:cpu:nanoseconds:cpu:nanoseconds
	TypeWait Type = "wait" // wait:wait:nanoseconds:wait:nanoseconds
	TypeGPU  Type = "gpu"  // gpu_time:kernel_launches:count and gpu_time:gpu_time:nanoseconds
)

const numTypes = 3

var types = [numTypes]Type{TypeCPU, TypeWait, TypeGPU}

func (t Type) index() int { return slices.Index(types[:], t) }

// Profile is one window of one process's profile of one type.
type Profile struct {
	PID            uint32
	Type           Type
	StartNS, EndNS uint64 // the window, CLOCK_MONOTONIC ns
	Prof           *profile.Profile
}

// Builder turns events and steps into profiles. Give it each event before
// the control loop sees it (the loop cuts a step on a later event, so a
// step's samples are in by then) and each step the loop cuts; Flush
// returns the windows complete. It is not safe for concurrent use: the
// goroutine that adds events owns it.
type Builder struct {
	cfg      Config
	interval uint64
	lag      uint64
	procs    map[uint32]*proc
	// offset is wall minus event clock, ns, read once: windows start at
	// multiples of the interval on the wall clock.
	offset   int64
	offsetOK bool
	waits    map[uint64]lastWait // by pid<<32|tid: the stack a GIL tail is under
	// held are samples taken inside probed calls, until the call's wait
	// comes or does not (offcpu.go); recent the threads' latest waits.
	held    []held
	recent  map[uint64]*threadWaits
	kernels map[kernelKey]frame
	stats   Stats
}

type lastWait struct {
	end   uint64
	stack []frame
}

type kernelKey struct {
	pid    uint32
	handle uint64
}

// New makes a Builder.
func New(cfg Config) *Builder {
	cfg = cfg.withDefaults()
	return &Builder{cfg: cfg, interval: uint64(cfg.Interval), lag: uint64(cfg.Lag), procs: map[uint32]*proc{},
		waits: map[uint64]lastWait{}, kernels: map[kernelKey]frame{}, recent: map[uint64]*threadWaits{}}
}

func (b *Builder) proc(pid uint32) *proc {
	p := b.procs[pid]
	if p == nil {
		p = &proc{slots: map[int64]*slot{}}
		b.procs[pid] = p
	}
	return p
}

// windowIndex is the window holding instant t, on the wall clock.
func (b *Builder) windowIndex(t uint64) int64 {
	if !b.offsetOK {
		b.offset, b.offsetOK = b.cfg.Clock(t).UnixNano()-int64(t), true
	}
	w := int64(t) + b.offset
	i := w / int64(b.interval)
	if w < 0 && w%int64(b.interval) != 0 {
		i--
	}
	return i
}

// bounds are window i's start and end on the event clock (the first
// starts at 0 where the wall clock's interval began before the events').
func (b *Builder) bounds(i int64) (start, end uint64) {
	lo, hi := i*int64(b.interval)-b.offset, (i+1)*int64(b.interval)-b.offset
	return uint64(max(lo, 0)), uint64(max(hi, 0))
}

// window is p's window i of type typ, nil where it was sent already.
func (b *Builder) window(p *proc, i int64, typ Type) *window {
	sl := p.slots[i]
	if sl == nil {
		start, end := b.bounds(i)
		if end <= p.flushedTo {
			return nil
		}
		sl = &slot{start: start, end: end}
		p.slots[i] = sl
	}
	w := sl.by[typ.index()]
	if w == nil {
		w = newWindow(b)
		sl.by[typ.index()] = w
	}
	return w
}
