package probes

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf/link"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// Record sites. Most of a training job's CUDA event records are its
// libraries' own: on each H200 DDP rank, ~51 a step on the thread that
// launches the backward pass (DDP's and NCCL's, through the CUDA runtime),
// against the two a loop timing itself records (README). None of them is
// read: they are waited on by streams and polled by NCCL's watchdog. Yet
// each traps where the runtime's record functions are probed, ~0.1 ms of
// that thread's time a step. A record matters to the correlator only as
// half of an elapsed-time reading (its time says where the reading's span
// began), or as the step boundary, which the caller rules out
// (NarrowRecords).
//
// So once steps are found the record probes note their callers (the
// return address, Event.Caller), the elapsed-time reads say which callers'
// events they read, and after recordLearn the records' functions go
// unprobed: probes on the call instructions of the callers whose records
// are read (recordWatch.kept) take over, each checked to
// call the record function (straight, through its PLT stub or through a
// pointer in memory). Torch's Python binding (torch.cuda.Event.record)
// calls the runtime from a call site of its own, DDP and NCCL from
// theirs; DDP's sampled timings, read once in ~100 steps, are recorded
// from the call site of its collectives' records (at::cuda::CUDAEvent's),
// 1 read in ~250 of its records on the H200 ranks: left unprobed, their
// readings are told from the loop's by their records going unseen
// (correlate's othersReading). A job that reads none keeps no record
// probe. Where 1 in recordMissShare of a window of recordWindow reads
// reads events no probed site recorded, the functions' probes come back
// (the job began timing something new), for good after recordWidenings of
// those.
const (
	recordLearn = 3 * time.Second
	// recordEvidence: records seen in that time, at the least.
	recordEvidence = 200
	// recordReads: elapsed-time reads whose records were both seen, at
	// the least, where the job reads any.
	recordReads = 2
	// recordReadShare: a caller's records are kept probed where at least
	// 1 in this many was read.
	recordReadShare = 20
	// recordWindow and recordMissShare: once narrowed, reads are counted
	// in windows of recordWindow; 1 in recordMissShare of a window
	// reading events no kept site recorded widens the probes again.
	recordWindow    = 64
	recordMissShare = 4
	// recordSaving: narrow only where at least 1 in recordSaving of the
	// records would go unprobed.
	recordSaving = 10
	// recordWidenings: after this many, the records stay probed at their
	// functions.
	recordWidenings = 3
	// recordHandles bounds the handles remembered (events created anew
	// each step would grow the map without end).
	recordHandles = 1 << 16
)

// recordSite is one caller of a record function.
type recordSite struct {
	api   uint16 // the function called
	n     int    // records since learning began
	reads int    // of those, read
}

// kept says whether a site's records are read enough to stay probed: 1
// in recordReadShare of them, or at least half the reads read its events
// (the loop's own timing, where it records through a helper that
// libraries share, as C++ code using at::cuda::CUDAEvent would: its
// readings are the step's compute and mark where the data phase ends).
func (w *recordWatch) kept(r *recordSite) bool {
	return r.reads > 0 && (r.reads*recordReadShare >= r.n || 2*r.reads >= w.reads)
}

// recordWatch is one process's record callers, learning or narrowed.
type recordWatch struct {
	since          time.Time
	callers        map[uint64]uint64 // event handle -> caller of its latest record
	sites          map[uint64]*recordSite
	records, reads int // since learning began
	unseen         int // reads with a record not seen
	narrowed       bool
	keep           map[uint64]bool // the callers kept probed, once narrowed
	recorded       map[uint64]bool // handles recorded at those since narrowing
	windowReads    int             // reads in this window, once narrowed
	windowMissed   int             // of those, reading a handle not recorded since narrowing
	widen          bool
	widenings      int
	done           bool
}

func newRecordWatch(now time.Time, widenings int) *recordWatch {
	return &recordWatch{since: now, callers: map[uint64]uint64{}, sites: map[uint64]*recordSite{}, widenings: widenings}
}

// Records learns, for each process whose step boundary is no record,
// which call sites' records its elapsed-time reads read, and then probes
// its records at those sites only (above).
type Records struct {
	*core
	twins *twinDecider // which layer times the event calls
	// watches: processes whose event records may be probed at their
	// readers' call sites only; under mu.
	watches map[int]*recordWatch
	// narrowedTo: the call sites each process's records were last probed
	// at, while they were (Sites); kept past detach, for the summary.
	narrowedTo map[int]int
}

func newRecords(c *core, twins *twinDecider) *Records {
	return &Records{core: c, twins: twins, watches: map[int]*recordWatch{}, narrowedTo: map[int]int{}}
}

func (r *Records) tick(time.Time) {}

func (r *Records) forget(pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.watches, pid)
}

// Narrow says that pid's step boundary is no event record: its
// records may be probed at their readers' call sites only, once they are
// learnt. A second call changes nothing.
func (r *Records) Narrow(pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watches[pid] == nil && r.targets[pid] != nil {
		r.watches[pid] = newRecordWatch(time.Now(), 0)
	}
}

// Sites says at how many call sites pid's event records were
// probed at the end, where they were probed only at those.
func (r *Records) Sites(pid int) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.narrowedTo[pid]
	return n, ok
}

// note counts one record or elapsed-time read of the runtime.
func (w *recordWatch) note(ev *events.Event, class cudaapi.Class) {
	switch class {
	case cudaapi.ClassRecord:
		if w.narrowed {
			// From a call site's probe (no caller read), or from a kept
			// caller through the functions' probes, which report on while
			// they are closed in the background.
			if c := ev.Caller(); c == 0 || w.keep[c] {
				if len(w.recorded) >= recordHandles {
					clear(w.recorded) // a loop creating its events anew each step
				}
				w.recorded[ev.Handle()] = true
			}
			return
		}
		c := ev.Caller()
		if c == 0 {
			return // a call site's probe, reporting on as it closes after a widening
		}
		if len(w.callers) >= recordHandles {
			clear(w.callers)
		}
		w.callers[ev.Handle()] = c
		site := w.sites[c]
		if site == nil {
			site = &recordSite{api: ev.API}
			w.sites[c] = site
		}
		site.n++
		w.records++
	case cudaapi.ClassElapsed:
		if w.narrowed {
			w.windowReads++
			if !w.recorded[ev.Handle()] || !w.recorded[ev.Second()] {
				w.windowMissed++
			}
			if w.windowReads >= recordWindow {
				w.widen = w.widen || w.windowMissed*recordMissShare >= w.windowReads
				w.windowReads, w.windowMissed = 0, 0
			}
			return
		}
		a, okA := w.callers[ev.Handle()]
		b, okB := w.callers[ev.Second()]
		if !okA || !okB || a == 0 || b == 0 {
			w.unseen++
			return
		}
		w.sites[a].reads++
		w.sites[b].reads++
		w.reads++
	}
}

// observe counts a batch's records and reads for the processes
// watched, and narrows or widens their record probes where due.
func (r *Records) observe(batch []events.Event) {
	r.mu.Lock()
	// Watches given up on (done) cost a batch nothing.
	active := false
	for _, w := range r.watches {
		active = active || !w.done
	}
	if !active {
		r.mu.Unlock()
		return
	}
	for i := range batch {
		ev := &batch[i]
		if ev.Kind != events.KindCall {
			continue
		}
		w := r.watches[int(ev.PID)]
		if w == nil || w.done {
			continue
		}
		if a, ok := cudaapi.ByID(ev.API); ok && a.Layer == cudaapi.LayerRuntime {
			w.note(ev, a.Class)
		}
	}
	now := time.Now()
	var narrow, widen []*target
	for pid, w := range r.watches {
		t := r.targets[pid]
		switch {
		case t == nil || w.done:
		case w.narrowed && w.widen:
			widen = append(widen, t)
		case !w.narrowed && now.Sub(w.since) >= recordLearn && w.records >= recordEvidence:
			narrow = append(narrow, t)
		}
	}
	r.mu.Unlock()
	for _, t := range narrow {
		r.narrow(t)
	}
	for _, t := range widen {
		r.widen(t)
	}
}

// narrow puts t's record probes on the call sites whose records
// were read, and takes them off the record functions, where that is sure
// and saves traps; else it waits, or leaves the functions probed.
func (r *Records) narrow(t *target) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.watches[t.pid]
	if w == nil {
		return
	}
	stay := func(why string, args ...any) {
		w.done = true
		r.cfg.Log.Debug("event records stay probed at their functions: "+why, append([]any{"pid", t.pid}, args...)...)
	}
	switch r.twins.layers[t.pid][twinEvents] {
	case twinUndecided:
		return // the driver's probes may yet time them: wait
	case twinDriver:
		stay("the driver's probes time them, under the runtime's own call site")
		return
	}
	if w.unseen*4 > w.reads {
		stay("the job reads events whose records go unseen", "reads", w.reads, "unseen", w.unseen)
		return
	}
	if w.unseen+w.reads > 0 && w.reads < recordReads {
		return // reads seen, too few to say which sites: wait
	}
	read, unread := 0, 0
	for _, site := range w.sites {
		if w.kept(site) {
			read += site.n
		} else {
			unread += site.n
		}
	}
	if unread*recordSaving < w.records {
		stay("nearly all their records are read", "records", w.records, "read", read)
		return
	}
	links, keep, err := r.probeSites(t, w)
	if err != nil {
		stay("a call site cannot be probed", "err", err)
		return
	}
	var gone []link.Link
	for _, l := range t.libs {
		gone = append(gone, l.records...)
		l.records = nil
	}
	t.recordSites = links
	// The handles the kept sites recorded last: read after this, they
	// are no sign of a site missed.
	w.recorded = map[uint64]bool{}
	for h, c := range w.callers {
		if keep[c] {
			w.recorded[h] = true
		}
	}
	w.narrowed, w.keep = true, keep
	r.narrowedTo[t.pid] = len(keep)
	w.callers, w.sites = nil, nil
	r.cfg.Log.Info("CUDA event records probed only where the job reads them: the rest go unseen", "pid", t.pid,
		"call sites", len(keep), "records kept", read, "records left", unread, "in", time.Since(w.since).Round(time.Millisecond))
	r.closer.close(gone, nil, func(err error) { r.cfg.Log.Warn("record probes not all detached", "pid", t.pid, "err", err) })
}

// probeSites attaches the probes on the call instructions of the
// kept sites, and returns them with the callers they serve. Under mu.
func (r *Records) probeSites(t *target, w *recordWatch) ([]link.Link, map[uint64]bool, error) {
	maps, err := readMaps(r.cfg.ProcRoot, t.pid)
	if err != nil {
		return nil, nil, err
	}
	byFile := map[string][]uint64{}
	cookies := map[string][]uint64{}
	files := map[string]MappedFile{}
	keep := map[uint64]bool{}
	for caller, site := range w.sites {
		if !w.kept(site) {
			continue
		}
		keep[caller] = true
		fn, probe, err := recordFunction(t, maps, site.api)
		if err != nil {
			return nil, nil, err
		}
		at, err := callSite(r.cfg.ProcRoot, t.pid, maps, caller, fn)
		if err != nil {
			return nil, nil, fmt.Errorf("caller %#x: %w", caller, err)
		}
		k := at.file.Key()
		files[k] = at.file
		byFile[k] = append(byFile[k], at.offset)
		cookies[k] = append(cookies[k], withoutCaller(probe.Cookie()))
		r.cfg.Log.Debug("event record call site", "pid", t.pid, "file", at.file.Path, "offset", at.offset, "placement", at.place, "records", site.n)
	}
	var links []link.Link
	for k, offs := range byFile {
		l, err := attachUprobes(files[k].HostPath, r.objs.ApiInstant, &link.UprobeMultiOptions{Addresses: offs, Cookies: cookies[k], PID: uint32(t.pid)}, false)
		if err != nil {
			closeLinks(links)
			return nil, nil, fmt.Errorf("attach in %s: %w", files[k].Path, err)
		}
		links = append(links, l)
	}
	return links, keep, nil
}

// widen probes t's record functions again, the call sites' probes
// going: the job read an event recorded elsewhere.
func (r *Records) widen(t *target) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.watches[t.pid]
	if w == nil {
		return
	}
	var errs []error
	for _, l := range t.libs {
		if len(l.recordPlan.Probes) == 0 || l.records != nil {
			continue
		}
		rs, err := attachPrograms(r.objs, t.pid, l.recordPlan, ProgInstant)
		errs = append(errs, err)
		l.records = rs
	}
	gone := t.recordSites
	t.recordSites = nil
	delete(r.narrowedTo, t.pid)
	next := newRecordWatch(time.Now(), w.widenings+1)
	next.done = next.widenings >= recordWidenings
	r.watches[t.pid] = next
	r.cfg.Log.Info("CUDA event records probed at their functions again: the job read an event recorded elsewhere",
		"pid", t.pid, "for good", next.done)
	if err := errors.Join(errs...); err != nil {
		r.warnUnlessExited(t, "record probes not attached again", err)
	}
	r.closer.close(gone, nil, func(err error) { r.cfg.Log.Warn("record call-site probes not all detached", "pid", t.pid, "err", err) })
}

// recordFunction is where the runtime's record function api is in t's
// memory, with its probe. Under mu.
func recordFunction(t *target, maps []mapping, api uint16) (uint64, Probe, error) {
	for _, l := range t.libs {
		for _, p := range l.recordPlan.Probes {
			if p.API.ID != api {
				continue
			}
			for _, m := range maps {
				if m.holds(l.plan.File) && len(m.perms) > 2 && m.perms[2] == 'x' &&
					p.Symbol.FileOffset >= m.offset && p.Symbol.FileOffset < m.offset+(m.end-m.start) {
					return m.start + p.Symbol.FileOffset - m.offset, p, nil
				}
			}
			return 0, p, fmt.Errorf("%s is not mapped in PID %d", p.API.Name, t.pid)
		}
	}
	a, _ := cudaapi.ByID(api)
	return 0, Probe{}, fmt.Errorf("%s is not probed in the runtime", a.Name)
}
