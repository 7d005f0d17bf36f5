package profiles

import "github.com/gpuprof/gpuprof/correlate"

// labels are a sample's labels, each of a bounded set of values.
type labels struct {
	phase correlate.Phase
	kind  string // wait: wait_kind; gpu: gpu_time_source
	span  int    // the step's index + 1; 0: in no step
}

type sampleKey struct {
	stack int
	labels
}

// pending is a sample whose step is not cut yet: an instant (a CPU sample,
// a launch) or a stretch of blocked time from start to end.
type pending struct {
	stack      int
	tid        uint32
	start, end uint64 // start == end: an instant
	value      int64  // cpu: the sampling period; gpu: the launches it stands for
	kind       string // wait: its kind
}

// window is one process's samples of one profile type from start to end:
// its stacks once each, the samples labelled so far summed by stack and
// labels, and those still waiting for their step.
type window struct {
	stacks  map[string]int
	frames  [][]frame
	agg     map[sampleKey]*[2]int64
	pending []pending
	period  int64 // cpu: the sampling period seen
	b       *Builder
}

func newWindow(b *Builder) *window {
	return &window{stacks: map[string]int{}, agg: map[sampleKey]*[2]int64{}, b: b}
}

// intern is the stack's index in the window; past MaxStacks a new stack
// is "[other stacks]".
func (w *window) intern(stack []frame) int {
	k := stackKey(stack)
	if i, ok := w.stacks[k]; ok {
		return i
	}
	if len(w.frames) >= w.b.cfg.MaxStacks {
		w.b.stats.StacksFolded++
		return w.internAlways([]frame{otherStacks})
	}
	return w.internAlways(stack)
}

func (w *window) internAlways(stack []frame) int {
	k := stackKey(stack)
	if i, ok := w.stacks[k]; ok {
		return i
	}
	w.stacks[k] = len(w.frames)
	w.frames = append(w.frames, stack)
	return len(w.frames) - 1
}

// fold adds values to a sample; past MaxSamples a new sample goes to
// "[other stacks]" with its phase and kind but no step, so that the
// folded ones stay few.
func (w *window) fold(stack int, l labels, v0, v1 int64) {
	k := sampleKey{stack, l}
	a := w.agg[k]
	if a == nil {
		if len(w.agg) >= w.b.cfg.MaxSamples {
			w.b.stats.SamplesFolded++
			l.span = 0
			k = sampleKey{w.internAlways([]frame{otherStacks}), l}
			a = w.agg[k]
		}
		if a == nil {
			a = new([2]int64)
			w.agg[k] = a
		}
	}
	a[0] += v0
	a[1] += v1
}

// hold keeps a sample until its step is cut; false where the window holds
// MaxPending already.
func (w *window) hold(p pending) bool {
	if len(w.pending) >= w.b.cfg.MaxPending {
		w.b.stats.Unplaced++
		return false
	}
	w.pending = append(w.pending, p)
	return true
}

func (w *window) empty() bool { return len(w.agg) == 0 }
