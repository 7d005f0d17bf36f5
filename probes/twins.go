package probes

import (
	"slices"
	"sync"
	"time"

	"github.com/cilium/ebpf/link"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// Twins. A CUDA runtime's copies, syncs and event calls reach the driver's
// entry points of the same kind, so in a process whose runtime and driver
// are both probed each such call traps at both layers while only one
// should time it: on the H200 host, DDP ranks made ~48% of their CUDA call
// probe hits in such driver twins (each backward step's ~130
// gradient-bucket copies among them). The probes of each kind are
// attached in groups of their own at both layers, and the process's calls
// decide which layer keeps a group:
//
//   - the driver's, once every runtime call of the kind (twinEvidence of
//     them or more) was seen reaching a driver entry point of the same
//     kind underneath (counted by the BPF programs, twin_hits), and, for
//     copies, one that carries the copy's direction. The driver's probes
//     then time every call, the runtime's and those made straight to the
//     driver (NCCL's own runtime, JAX) alike, a device-to-device copy at
//     entry only (one trap: DDP's bucket copies), an event record once
//     rather than at both layers. On the H200 host torch's runtime reaches
//     cuMemcpyHtoDAsync_v2, cuMemcpyDtoHAsync_v2, cuMemcpyDtoDAsync_v2 and
//     cuEventRecordWithFlags for its copies and records (README).
//   - the runtime's, where some runtime calls reached no probed driver
//     entry point of their kind (or a copy one without a direction), once
//     a window of twinEvidence runtime calls had at most 1 in
//     twinDirectShare as many straight to the driver; calls made straight
//     to the driver after that are not seen.
//   - the runtime's too for event calls that reach the driver underneath,
//     where more than that share of records go straight to it and no
//     elapsed-time read does. Such records are a library's own, made
//     through a runtime linked into it (NCCL's: three a collective,
//     ~51 a step on each H200 DDP rank's autograd thread, more than
//     torch's own 40), and no step's timing: a loop timing itself reads
//     elapsed times. Every one of them trapped on the thread that
//     launches the backward pass; the runtime's probes time torch's
//     records at one trap each, as the driver's did.
//
// A window with more direct calls than that starts a new one: NCCL's
// direct copies while it connects the ranks only delay the decision.
const (
	twinEvidence    = 200
	twinDirectShare = 100
	// twinSeenShare: the share of runtime calls (in 1000) whose driver
	// twins must have been seen for the driver to time them all. Not all:
	// the twins are counted as they happen, the runtime calls as their
	// events are read, and a call can be in the one count and not yet in
	// the other.
	twinSeenShare = 990
)

// The twin groups: the kinds of call the driver shares with the runtime,
// each decided on its own.
const (
	twinCopies = "copies"
	twinSyncs  = "syncs"
	twinEvents = "event calls" // records and elapsed-time reads
	// twinRecordLinks holds, in attachedLib.twins, the event calls' record
	// probes apart from their other probes: decided with them, kept apart
	// (attachedLib.records) where the runtime keeps them.
	twinRecordLinks = "event records"
)

// twinGroup is the kind of call a driver entry point shares with the
// runtime, "" for those it does not (launches, memory, module loading).
func twinGroup(a cudaapi.API) string {
	switch a.Class {
	case cudaapi.ClassCopy:
		return twinCopies
	case cudaapi.ClassSync:
		return twinSyncs
	case cudaapi.ClassRecord, cudaapi.ClassElapsed:
		return twinEvents
	}
	return ""
}

// splitTwins separates a runtime or driver plan's probes of each twin
// group from the rest.
func splitTwins(lp LibraryPlan) (rest LibraryPlan, twins map[string]LibraryPlan) {
	rest = lp
	if lp.Layer != cudaapi.LayerDriver && lp.Layer != cudaapi.LayerRuntime {
		return rest, nil
	}
	rest.Probes = nil
	for _, p := range lp.Probes {
		g := twinGroup(p.API)
		if g == "" {
			rest.Probes = append(rest.Probes, p)
			continue
		}
		if twins == nil {
			twins = map[string]LibraryPlan{}
		}
		tp := twins[g]
		if tp.Probes == nil {
			tp = lp
			tp.Probes = nil
		}
		tp.Probes = append(tp.Probes, p)
		twins[g] = tp
	}
	return rest, twins
}

// twinTally is one process's calls of one twin group while undecided.
type twinTally struct {
	window  [2]uint64 // this window's calls: [0] timed by the runtime, [1] straight to the driver
	runtime uint64    // runtime calls since attach
	// directReads: elapsed-time reads straight to the driver since
	// attach; any keeps the direct records probed (twinVerdict).
	directReads uint64
	// since is when the group's runtime probes were last attached
	// (CLOCK_MONOTONIC ns, the events' clock), 0 while none are. A driver
	// call that began before it may be a runtime call's twin that no
	// probe saw enter (a library's probes go in one after the other, the
	// driver's often first), so only later ones count as calls straight
	// to the driver.
	since uint64
	// threads are those with an event call seen since (twinEvents only).
	// A thread's first may be the driver twin of a runtime read that was
	// in flight as the probes went in: that read counts in no
	// directReads. A thread that reads straight from the driver reads
	// again.
	threads map[uint32]struct{}
}

// firstOf says whether tid's is the first event call seen since the
// runtime's probes went in, and notes it.
func (n *twinTally) firstOf(tid uint32) bool {
	if _, ok := n.threads[tid]; ok {
		return false
	}
	if n.threads == nil {
		n.threads = map[uint32]struct{}{}
	}
	n.threads[tid] = struct{}{}
	return true
}

// twinCounts are one process's tallies by twin group; nil once decided.
type twinCounts map[string]*twinTally

// count notes a call event for its process's twin decisions. With
// sampledD2D, device-to-device copies count at neither layer: the driver's
// are probed with the launches (sampling.go), part of the time, in no
// twin group.
func (c twinCounts) count(ev *events.Event, sampledD2D bool) {
	a, ok := cudaapi.ByID(ev.API)
	if !ok {
		return
	}
	g := twinGroup(a)
	if g == "" || sampledD2D && a.Class == cudaapi.ClassCopy && ev.Dir() == cudaapi.DirDtoD {
		return
	}
	n := c[g]
	if n == nil {
		return // not attached, or decided
	}
	switch a.Layer {
	case cudaapi.LayerRuntime:
		n.window[0]++
		n.runtime++
		if g == twinEvents {
			n.firstOf(ev.TID)
		}
	case cudaapi.LayerDriver:
		if n.since == 0 || ev.Start < n.since {
			return
		}
		n.window[1]++
		first := g == twinEvents && n.firstOf(ev.TID)
		if a.Class == cudaapi.ClassElapsed && !first {
			n.directReads++
		}
	}
}

// twinLayer is which layer keeps a twin group's probes.
type twinLayer uint8

const (
	twinUndecided twinLayer = iota
	twinDriver              // the runtime's probes go: the driver's time every call
	twinRuntime             // the driver's go: the runtime's time every call
	twinRestart             // too many direct calls this window: count again
)

// twinVerdict decides group g at the end of a window: seen are the
// driver twins counted underneath the group's runtime calls since attach,
// undirected whether any was a copy without a direction.
func twinVerdict(g string, n twinTally, seen uint64, undirected bool) twinLayer {
	few := n.window[1]*twinDirectShare <= n.window[0] // calls straight to the driver
	switch {
	case n.window[0] < twinEvidence:
		return twinUndecided
	case !undirected && seen*1000 >= n.runtime*twinSeenShare:
		if g == twinEvents && !few && n.directReads == 0 {
			return twinRuntime // a library's own records (above)
		}
		return twinDriver
	case few:
		return twinRuntime
	}
	return twinRestart
}

// twinsSeen sums a process's driver twins by group, and says whether a
// copy twin carried no direction; with sampledD2D, leaving out the
// device-to-device copies (count).
func twinsSeen(hits map[uint16]uint64, sampledD2D bool) (seen map[string]uint64, undirected bool) {
	seen = map[string]uint64{}
	for id, n := range hits {
		a, ok := cudaapi.ByID(id)
		if !ok || n == 0 || sampledD2D && a.Class == cudaapi.ClassCopy && a.Dir == cudaapi.DirDtoD {
			continue
		}
		seen[twinGroup(a)] += n
		if a.Class == cudaapi.ClassCopy && a.Dir == cudaapi.DirUnknown {
			undirected = true
		}
	}
	return seen, undirected
}

// twinDecider decides, for each process, which layer times each twin
// group (above), and closes the other layer's probes of the group.
type twinDecider struct {
	*core
	// calls counts, by process, the calls deciding whether its driver
	// twins go; under mu.
	calls map[int]twinCounts
	// layers are the twin groups decided, by process; under mu. A
	// library the process loads later is probed at that layer only.
	layers map[int]map[string]twinLayer
	// raising orders the raises of the runtime generations, each a read
	// and a write of all of them, made as closes end in the background:
	// two at once could lose one.
	raising sync.Mutex
}

func newTwinDecider(c *core) *twinDecider {
	return &twinDecider{core: c, calls: map[int]twinCounts{}, layers: map[int]map[string]twinLayer{}}
}

func (d *twinDecider) tick(time.Time) {}

// forget drops a detached process's counts and decisions, in the
// programs too.
func (d *twinDecider) forget(pid int) {
	d.mu.Lock()
	delete(d.calls, pid)
	delete(d.layers, pid)
	d.mu.Unlock()
	d.objs.ForgetTwins(uint32(pid))
}

// decide settles the twin groups of t whose window is full: one
// layer's probes of the group go, the other's join their libraries'
// links for good.
func (d *twinDecider) decide(t *target) {
	d.mu.Lock()
	full := false
	for _, n := range d.calls[t.pid] {
		full = full || n != nil && n.window[0] >= twinEvidence
	}
	d.mu.Unlock()
	if !full {
		return
	}
	hits, err := d.objs.TwinCounts(uint32(t.pid))
	if err != nil {
		d.cfg.Log.Warn("twin counts not read: both layers stay probed", "pid", t.pid, "err", err)
		return
	}
	seen, undirected := twinsSeen(hits, d.cfg.Launches)
	var gone []link.Link
	var raise []uint64 // the twin codes of the groups whose runtime probes go
	d.mu.Lock()
	counts := d.calls[t.pid]
	for g, n := range counts {
		if n == nil {
			continue
		}
		layer := twinVerdict(g, *n, seen[g], g == twinCopies && undirected)
		switch layer {
		case twinUndecided:
			continue
		case twinRestart:
			d.cfg.Log.Debug("both layers stay probed: calls made straight to the driver", "pid", t.pid, "calls", g,
				"runtime", n.window[0], "straight to the driver", n.window[1])
			n.window = [2]uint64{}
			continue
		case twinDriver:
			raise = append(raise, twinGroupCode(g))
			d.cfg.Log.Info("CUDA runtime probes detached: the driver's time these calls and those made straight to it",
				"pid", t.pid, "calls", g, "runtime", n.runtime, "seen in the driver", seen[g])
		case twinRuntime:
			d.cfg.Log.Info("driver probes detached: the CUDA runtime's probes time these calls, those made straight to the driver go unseen",
				"pid", t.pid, "calls", g, "runtime", n.window[0], "straight to the driver", n.window[1])
		}
		gone = append(gone, settleTwins(t, g, layer)...)
		counts[g] = nil
		d.decided(t.pid)[g] = layer
	}
	d.mu.Unlock()
	var after func()
	if len(raise) > 0 {
		// The runtime calls in flight as their probes went will never be
		// seen returning; those of groups still undecided will.
		after = func() {
			d.raising.Lock()
			defer d.raising.Unlock()
			if err := d.objs.RaiseRuntimeGeneration(raise...); err != nil {
				d.cfg.Log.Warn("runtime calls in flight not ended", "err", err)
			}
		}
	}
	d.closer.close(gone, after, func(err error) { d.cfg.Log.Warn("twin probes not all detached", "pid", t.pid, "err", err) })
}

// settleTwins keeps the group's links of the layer that times it, in
// every library of t, and returns those of the other layer to close.
func settleTwins(t *target, g string, keep twinLayer) (gone []link.Link) {
	for _, l := range t.libs {
		ls, ok := l.twins[g]
		if !ok {
			continue
		}
		delete(l.twins, g)
		var rs []link.Link
		if g == twinEvents {
			rs = l.twins[twinRecordLinks]
			delete(l.twins, twinRecordLinks)
		}
		if keepsTwins(l.plan.Layer, keep) {
			l.links = append(l.links, ls...)
			l.keepRecords(rs)
		} else {
			gone = append(gone, slices.Concat(ls, rs)...)
		}
	}
	return gone
}

// splitRecords separates a twin group's event records from its other
// probes.
func splitRecords(tp LibraryPlan) (rest, records LibraryPlan) {
	rest, records = tp, tp
	rest.Probes, records.Probes = nil, nil
	for _, p := range tp.Probes {
		if p.API.Class == cudaapi.ClassRecord {
			records.Probes = append(records.Probes, p)
		} else {
			rest.Probes = append(rest.Probes, p)
		}
	}
	return rest, records
}

// keepRecords keeps a library's event-record probes for good: apart where
// the runtime times the records, so that their call sites may take over
// (recordsites.go).
func (l *attachedLib) keepRecords(rs []link.Link) {
	if l.plan.Layer == cudaapi.LayerRuntime {
		l.records = append(l.records, rs...)
	} else {
		l.links = append(l.links, rs...)
	}
}

// keepsTwins says whether a library of this layer keeps a group's probes
// once the group is decided for the given layer.
func keepsTwins(layer cudaapi.Layer, decided twinLayer) bool {
	return layer == cudaapi.LayerDriver && decided == twinDriver || layer == cudaapi.LayerRuntime && decided == twinRuntime
}

// decided are the groups decided for pid, by the layer that times
// them: a library that pid loads later is probed at that layer only.
// Under mu.
func (d *twinDecider) decided(pid int) map[string]twinLayer {
	l := d.layers[pid]
	if l == nil {
		l = map[string]twinLayer{}
		d.layers[pid] = l
	}
	return l
}

// observe counts the call events of a batch for their processes' twin
// decisions, and makes the decisions due.
func (d *twinDecider) observe(batch []events.Event) {
	d.mu.Lock()
	// The processes with a group still undecided: once all are decided
	// (the usual state), a batch costs nothing here.
	var counting map[int]twinCounts
	for pid, c := range d.calls {
		for _, n := range c {
			if n != nil {
				if counting == nil {
					counting = map[int]twinCounts{}
				}
				counting[pid] = c
				break
			}
		}
	}
	if counting == nil {
		d.mu.Unlock()
		return
	}
	due := map[*target]bool{}
	for i := range batch {
		ev := &batch[i]
		if ev.Kind != events.KindCall {
			continue
		}
		c := counting[int(ev.PID)]
		if c == nil {
			continue
		}
		c.count(ev, d.cfg.Launches)
		if t := d.targets[int(ev.PID)]; t != nil {
			due[t] = true
		}
	}
	d.mu.Unlock()
	for t := range due {
		d.decide(t)
	}
}

// attach attaches a library's twin groups: undecided ones apart, in
// lib.twins, for the process's calls to settle; decided ones with the
// library's other links, or not at all, as decided.
func (d *twinDecider) attach(t *target, lib *attachedLib, twins map[string]LibraryPlan) error {
	for g, tp := range twins {
		d.mu.Lock()
		layer := d.decided(t.pid)[g]
		d.mu.Unlock()
		if layer != twinUndecided && !keepsTwins(tp.Layer, layer) {
			continue
		}
		rest, records := splitRecords(tp)
		ls, err := attachPrograms(d.objs, t.pid, rest, callPrograms...)
		if err != nil {
			lib.close()
			return err
		}
		rs, err := attachPrograms(d.objs, t.pid, records, ProgInstant)
		if err != nil {
			closeLinks(ls)
			lib.close()
			return err
		}
		if len(records.Probes) > 0 && tp.Layer == cudaapi.LayerRuntime {
			lib.recordPlan = records
		}
		if layer != twinUndecided {
			lib.links = append(lib.links, ls...)
			lib.keepRecords(rs)
			continue
		}
		if lib.twins == nil {
			lib.twins = map[string][]link.Link{}
		}
		lib.twins[g] = ls
		if len(rs) > 0 {
			lib.twins[twinRecordLinks] = rs
		}
		d.mu.Lock()
		if d.calls[t.pid] == nil {
			d.calls[t.pid] = twinCounts{}
		}
		n := d.calls[t.pid][g]
		if n == nil {
			n = &twinTally{}
			d.calls[t.pid][g] = n
		}
		if tp.Layer == cudaapi.LayerRuntime {
			n.since = monotonicNow()
		}
		d.mu.Unlock()
	}
	return nil
}

func (l twinLayer) String() string {
	return [...]string{"undecided", "the driver's", "the runtime's", "a new window"}[l]
}
