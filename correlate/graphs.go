package correlate

import (
	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// A CUDA graph replay (cuGraphLaunch) is one call that runs many kernels:
// PyTorch's torch.cuda.graphs and torch.compile's reduce-overhead mode
// capture a step's kernels once and replay them every step after. The
// launch probes count the replay as one graph launch; graphs follows
// where each graph came from, so that a replay counts the kernels it ran.
//
// A graph made by stream capture holds the kernels its thread launched
// between cuStreamBeginCapture and cuStreamEndCapture (launches ride on
// the thread's next call, so those carried by the calls after the begin,
// the end's included). Those kernels did not run then: they are taken
// out of the capturing step's launches (Step.CapturedLaunches).
// cuGraphInstantiate makes the graph an exec, and each graph launch event
// names the exec it replays (bpf: launch_entry).
//
// A count is trusted only where every launch of the capture was counted:
// the launch probes attached at its begin and not detached before its
// end. A graph captured before gpuprof attached, while launches were not
// counted, or built node by node (cuGraphAddKernelNode, not probed) has
// no known count, and the steps that replay it no Step.GraphKernels.
// Captures are told apart by thread, not stream: two streams captured on
// one thread at once leave both unknown.
type graphs struct {
	captures map[uint64]*capture  // open captures, by thread (threadID)
	graphs   map[handle]graphSize // CUgraph -> its kernels
	execs    map[handle]graphSize // CUgraphExec -> its kernels
}

// capture is a stream capture in progress on a thread.
type capture struct {
	launches uint64
	counted  bool // every launch since its begin was counted
}

// graphSize is how many kernels a graph runs, where known.
type graphSize struct {
	kernels uint64
	known   bool
}

// maxGraphs bounds the graphs and execs remembered (graphs are destroyed
// unseen: cuGraphDestroy is not probed). A job captures a few graphs, at
// most one per batch shape (vLLM's ~70); past this, the oldest are
// forgotten all at once, their replays counted unknown.
const maxGraphs = 1 << 14

func newGraphs() graphs {
	return graphs{captures: map[uint64]*capture{}, graphs: map[handle]graphSize{}, execs: map[handle]graphSize{}}
}

// launchProbes notes launch counting switching on or off: an open
// capture's count is incomplete once launches go uncounted.
func (g *graphs) launchProbes(on bool) {
	if on {
		return
	}
	for _, c := range g.captures {
		c.counted = false
	}
}

// note follows a call event of a thread (counted: launches are counted
// now) and marks its item: the launches it carries that were captured, or
// for a graph launch the kernels it ran.
func (g *graphs) note(it *item, counted bool) {
	e := &it.ev
	if e.Kind != events.KindCall || e.API >= cudaapi.UserBase {
		return
	}
	id := threadID(e.PID, e.TID)
	if c := g.captures[id]; c != nil {
		it.captured = e.Launches
		c.launches += uint64(e.Launches)
		if e.GraphLaunches > 0 {
			c.counted = false // a graph launched into the capture: its kernels are not followed
		}
	}
	a := e.Desc()
	switch {
	case a.Class == cudaapi.ClassGraphLaunch:
		if n := g.execs[handle{e.PID, e.Args[0]}]; n.known && e.GraphLaunches > 0 {
			// One launch is this event's; any more were ones whose
			// events were lost, exec unknown.
			it.graphKernels, it.graphKnown = n.kernels, 1
		}
	case a.Class != cudaapi.ClassGraph:
	case a.Graph == cudaapi.GraphCaptureEnd:
		// Ended, made a graph or not (a capture invalidated fails).
		c := g.captures[id]
		delete(g.captures, id)
		if e.OK() && e.Out != 0 {
			n := graphSize{known: c != nil && c.counted}
			if n.known {
				n.kernels = c.launches
			}
			g.put(g.graphs, handle{e.PID, e.Out}, n)
		}
	case !e.OK():
	case a.Graph == cudaapi.GraphCaptureBegin:
		if c := g.captures[id]; c != nil {
			c.counted = false // a second stream captured on the thread: the launches cannot be split
			return
		}
		g.captures[id] = &capture{counted: counted}
	case a.Graph == cudaapi.GraphInstantiate:
		if e.Out != 0 {
			g.put(g.execs, handle{e.PID, e.Out}, g.graphs[handle{e.PID, e.Handle()}])
		}
	}
}

func (g *graphs) put(m map[handle]graphSize, h handle, n graphSize) {
	if _, ok := m[h]; !ok && len(m) >= maxGraphs {
		clear(m)
	}
	m[h] = n
}
