package correlate

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// Boundary is what ends a step: the return of the last call of a cluster of
// calls of one kind on one thread, a cluster being such calls with no
// kernel launched between them (three elapsed-time reads in a row, or two
// loss.item() syncs, end one step together).
type Boundary struct {
	PID, TID uint32
	Calls    string // which calls, in words
	Reason   string // why these
	m        matcher
	byCalls  bool // launches not counted (Config.NoLaunchCounts): other calls count as work
	seen     int  // clusters of the boundary calls seen when it was found
	// inCluster are the kinds of call seen between boundary calls of one
	// cluster (the copy between two loss.item() syncs): while launches are
	// not counted, these do not end a cluster and other kinds do.
	inCluster map[key]bool
	// afterData: in most steps a boundary call came after the step's
	// fetch with no work between (a sync after the copy in), and ended
	// nothing. Without launch counts the builder passes over such a call.
	afterData bool
}

// CallKind is a kind of CUDA call as step boundaries are told apart:
// its class and, for a copy, its direction.
type CallKind struct {
	Class cudaapi.Class
	Dir   cudaapi.Dir // a copy's direction, where it has one
	// AnyDir: copies in every direction (a copy named without one, as
	// --step-boundary cudaMemcpyAsync names them).
	AnyDir bool
	// User: a --probe function's calls (Class none).
	User bool
}

// CallKind says which calls end the boundary's steps.
func (a Boundary) CallKind() CallKind {
	k := a.m.key
	return CallKind{Class: k.class, Dir: k.dir, AnyDir: a.m.anyDir, User: k.user != 0}
}

// token is one call of a thread, reduced to what boundary finding needs.
type token struct {
	k    key
	end  uint64
	work uint32 // kernel and graph launches the thread made before this call
	// data: a wait for samples or a DataLoader, a fetch, a copy in
	// (isDataEvent): the next step's fetch has begun.
	data bool
	// gap: launches were not counted from the last token to the next;
	// no cluster or interval spans it.
	gap bool
}

// threadTokens collects the calls of each thread.
type threadTokens struct {
	pid, tid    uint32
	lastReading uint64 // when its last elapsed-time reading of its own step returned
	toks        []token
	elapsed     int // successful elapsed-time reads
	launches    uint64
	toHost      int // syncs and device-to-host copies
}

// collect collects the calls of each thread in stretches of items in
// which launches were counted all through; a gap token parts them.
func collect(stretches ...[]item) []*threadTokens {
	byTID := map[uint64]*threadTokens{}
	var order []*threadTokens
	for n, items := range stretches {
		if n > 0 {
			for _, tt := range order {
				if k := len(tt.toks); k > 0 && !tt.toks[k-1].gap {
					tt.toks = append(tt.toks, token{gap: true})
				}
			}
		}
		order = collectStretch(items, byTID, order)
	}
	return order
}

func collectStretch(items []item, byTID map[uint64]*threadTokens, order []*threadTokens) []*threadTokens {
	for i := range items {
		e := &items[i].ev
		if e.Kind != events.KindCall && !(items[i].isWait && isDataEvent(&items[i])) {
			continue
		}
		id := threadID(e.PID, e.TID)
		tt := byTID[id]
		if tt == nil {
			tt = &threadTokens{pid: e.PID, tid: e.TID}
			byTID[id] = tt
			order = append(order, tt)
		}
		if e.Kind != events.KindCall {
			tt.toks = append(tt.toks, token{end: e.End, data: true})
			continue
		}
		a := e.Desc()
		k := keyOf(a, e)
		w := e.Launches + e.GraphLaunches
		if k.class == cudaapi.ClassElapsed {
			// A reading of events recorded before the thread's last
			// reading times an earlier step (DistributedDataParallel's
			// sampled timings): no mark of a step's end (builder.go).
			if staleReading(&items[i], tt.lastReading) {
				k = key{}
			} else {
				tt.lastReading = e.End
			}
		}
		tt.toks = append(tt.toks, token{k: k, end: e.End, work: w, data: isDataEvent(&items[i])})
		tt.launches += uint64(w)
		if k.class == cudaapi.ClassElapsed && e.OK() {
			tt.elapsed++
		}
		if toHost(k) {
			tt.toHost++
		}
	}
	return order
}

// interval is what a thread did between two consecutive boundaries: the
// work (kernels launched) and which kinds of other calls it made.
type interval struct {
	work int
	sig  string // the kinds of other calls made, allocations left out
}

// clusters cuts a thread's calls at the matched calls and returns the end of
// each cluster and the intervals between consecutive cluster ends. Work is
// the kernels launched; a thread with no launch counts (launch probes off)
// counts its other calls instead.
func clusters(toks []token, m matcher, byCalls bool) (ends []uint64, ivs []interval) {
	ends, ivs, _, _ = clustersWithin(toks, m, byCalls)
	return ends, ivs
}

// clustersWithin is clusters, also returning the kinds of call seen inside
// clusters (between two merged boundary calls), and how many boundary
// calls came after a fetch with no work between and before work (ending
// nothing).
func clustersWithin(toks []token, m matcher, byCalls bool) (ends []uint64, ivs []interval, within map[key]bool, afterData int) {
	if m.cut {
		ends, ivs = dataCuts(toks, m, byCalls)
		return ends, ivs, map[key]bool{}, 0
	}
	since, open, data := 0, false, false
	pendingAfterData := false   // a boundary call after a fetch, ending nothing if work follows
	others := map[key]bool{}    // kinds since the cluster began: the interval's signature
	sinceLast := map[key]bool{} // kinds since the last boundary call
	within = map[key]bool{}
	for _, t := range toks {
		if t.gap {
			// Nothing is known of the work in between: the next call
			// begins a cluster, and no interval spans the gap.
			since, open, data, pendingAfterData = 0, false, false, false
			clear(others)
			clear(sinceLast)
			continue
		}
		match := m.match(t.k)
		w := int(t.work)
		if byCalls {
			w = 0
			if !match {
				w = 1
			}
		}
		since += w
		if !match {
			data = data || t.data
			if t.data && t.k == (key{}) {
				continue // a wait
			}
			// Which kinds of call, not how many: the number of event
			// records or copies can vary step to step (PyTorch's pinned
			// memory allocator records an event per reuse), allocations
			// come and go with the caching allocator.
			if t.k.canBeBoundary() {
				others[t.k] = true
			}
			sinceLast[t.k] = true
			continue
		}
		if open && since == 0 && data {
			// A fetch came between: this call is the next step's, and ends
			// nothing (builder.needWork), if work follows it before the
			// next boundary call. Where none does, the thread's steps show
			// no work of their own (a stretch in which its kernels were
			// launched elsewhere, or not at all): such a call ends its
			// step, and counting it would have the builder pass over every
			// boundary while launches are not counted.
			pendingAfterData = true
			continue
		}
		if pendingAfterData && since > 0 {
			afterData++
		}
		pendingAfterData = pendingAfterData && since == 0
		data = false
		if open && since == 0 {
			ends[len(ends)-1] = t.end
			for k := range sinceLast {
				within[k] = true
			}
			clear(sinceLast)
			continue
		}
		clear(sinceLast)
		if open {
			ivs = append(ivs, interval{work: since, sig: signature(others)})
		}
		clear(others)
		ends = append(ends, t.end)
		open, since = true, 0
	}
	return ends, ivs, within, afterData
}

func signature(kinds map[key]bool) string {
	keys := make([]key, 0, len(kinds))
	for k := range kinds {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].less(keys[j]) })
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%d.%d.%d;", k.class, k.sync, k.dir)
	}
	return b.String()
}

// regular reports whether the intervals between boundaries look alike step
// after step: at least frac of them make the most common kinds of other
// calls and launch within tol of the median number of kernels. Comparing the other
// calls tells a boundary that comes once a step from one that comes twice
// (an event recorded before and after the forward pass) even when both
// halves launch as many kernels.
func regular(ivs []interval, tol, frac float64, anySig bool) (median int, ok bool) {
	if len(ivs) == 0 {
		return 0, false
	}
	work := make([]int, len(ivs))
	sigs := map[string]int{}
	for i, iv := range ivs {
		work[i] = iv.work
		sigs[iv.sig]++
	}
	modal, best := "", -1
	for sig, n := range sigs {
		if n > best || (n == best && sig < modal) {
			modal, best = sig, n
		}
	}
	slices.Sort(work)
	median = work[len(work)/2]
	if median == 0 {
		return 0, false
	}
	limit := max(1, tol*float64(median))
	in := 0
	for _, iv := range ivs {
		if d := float64(iv.work - median); (anySig || iv.sig == modal) && d <= limit && d >= -limit {
			in++
		}
	}
	return median, float64(in) >= frac*float64(len(ivs))
}

// recent is the later half of a candidate's intervals (at least atLeast of
// them): a loop's first steps may differ from the rest (DDP times its first
// ten iterations with events and syncs of its own; warm-up), and should not
// hold back a boundary the steps since show plainly. A boundary that comes
// twice a step differs in every stretch.
func recent(ivs []interval, atLeast int) []interval {
	keep := max(len(ivs)-len(ivs)/2, atLeast)
	if keep >= len(ivs) {
		return ivs
	}
	return ivs[len(ivs)-keep:]
}

// tier is how strict the regularity test is. The strict tier is tried
// first; the loose one only once there is plenty of data, for loops whose
// launch counts vary from step to step (dynamic shapes).
type tier struct {
	tol, frac float64
	minSpan   uint64 // ns of events needed before this tier is tried
	// anySig leaves out the kinds of other calls: only the kernels launched
	// between boundaries need be regular.
	anySig bool
}

var tiers = []tier{{tol: 0.15, frac: 0.85}, {tol: 0.5, frac: 0.7, minSpan: 10e9}}

// fallbackSpan is how much event time passes before threads other than the
// first-ranked may set the boundary.
const fallbackSpan = 10e9

type candidate struct {
	m        matcher
	n        int // clusters
	median   int
	priority int
}

// learn looks for the step boundary in buffered events: in the stretches
// of them in which launches were counted.
func learn(stretches [][]item, cfg Config, fixed *matcher) (Boundary, bool) {
	stretches = slices.DeleteFunc(slices.Clone(stretches), func(s []item) bool { return len(s) == 0 })
	if len(stretches) == 0 {
		return Boundary{}, false
	}
	last := stretches[len(stretches)-1]
	span := last[len(last)-1].ev.End - stretches[0][0].ev.End
	threads := collect(stretches...)
	if cfg.Thread != 0 {
		threads = slices.DeleteFunc(threads, func(t *threadTokens) bool { return t.tid != cfg.Thread })
	}
	if fixed != nil {
		return learnFixed(threads, *fixed, cfg)
	}
	threads = rank(threads)
	if len(threads) > 4 {
		threads = threads[:4]
	}
	for _, tr := range tiers {
		if span < tr.minSpan {
			continue
		}
		// Until there is plenty of data only the first-ranked thread may
		// set the boundary: a regular background thread (an inference
		// engine) must not win while the trainer has not yet shown enough
		// steps.
		limit := min(1, len(threads))
		if span >= fallbackSpan {
			limit = len(threads)
		}
		for _, th := range threads[:limit] {
			if c, ok := bestKey(th, cfg, tr); ok {
				return boundaryFor(th, c, tr, cfg), true
			}
		}
	}
	return Boundary{}, false
}

// rank orders threads by how likely each is the training loop: the loop
// waits for the GPU's results (and for its data), so threads that read
// CUDA event timings come first, then threads that bring results to the
// host (syncs, device-to-host copies), and among those the one submitting
// the most work. A thread that only launches work others wait for
// (PyTorch's autograd thread running the backward pass, a CUDA graph
// replayer) comes after them however many kernels it launches.
func rank(threads []*threadTokens) []*threadTokens {
	sort.SliceStable(threads, func(i, j int) bool {
		a, b := threads[i], threads[j]
		if a.elapsed != b.elapsed {
			return a.elapsed > b.elapsed
		}
		if (a.toHost > 0) != (b.toHost > 0) {
			return a.toHost > 0
		}
		if a.launches != b.launches {
			return a.launches > b.launches
		}
		return len(a.toks) > len(b.toks)
	})
	return threads
}

// bestKey picks the boundary among a thread's regular keys: of those that
// come about as often as the most frequent (once a step, not once every N
// steps), the one of highest priority.
func bestKey(th *threadTokens, cfg Config, tr tier) (candidate, bool) {
	seen := map[key]bool{}
	var keys []key
	for _, t := range th.toks {
		if t.k.canBeBoundary() && !seen[t.k] {
			seen[t.k] = true
			keys = append(keys, t.k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].less(keys[j]) })
	byCalls := cfg.NoLaunchCounts
	var regs []candidate
	var ms []matcher
	for _, k := range keys {
		ms = append(ms, matcher{key: k})
		if !k.isDataCopy() {
			ms = append(ms, matcher{key: k, cut: true})
		}
	}
	for _, m := range ms {
		ends, ivs := clusters(th.toks, m, byCalls)
		// Keys seen too few times still compete, so that a better key that
		// happens to come later in the step is not beaten by an earlier one
		// that reached the minimum first; the winner must have it.
		if len(ivs) < 2 {
			continue
		}
		if med, ok := regular(recent(ivs, cfg.LearnMin), tr.tol, tr.frac, tr.anySig); ok {
			regs = append(regs, candidate{m: m, n: len(ends), median: med, priority: m.key.priority()})
		}
	}
	if len(regs) == 0 {
		return candidate{}, false
	}
	// A cut's count holds the set-up's fetches too: it sets the bar only
	// where no cluster of calls is regular.
	nmax := 0
	for _, c := range regs {
		if !c.m.cut {
			nmax = max(nmax, c.n)
		}
	}
	if nmax == 0 {
		for _, c := range regs {
			nmax = max(nmax, c.n)
		}
	}
	var best candidate
	found := false
	for _, c := range regs {
		if float64(c.n) < 0.7*float64(nmax) {
			continue
		}
		// Of one priority, clusters of calls before cuts at fetches: a
		// cut is only needed where the calls come several times a step.
		switch {
		case !found, c.priority > best.priority:
		case c.priority < best.priority, c.m.cut && !best.m.cut:
			continue
		case c.m.cut == best.m.cut && c.n <= best.n:
			continue
		}
		best, found = c, true
	}
	return best, found && best.n > cfg.LearnMin
}

func boundaryFor(th *threadTokens, c candidate, tr tier, cfg Config) Boundary {
	unit := "kernel launches"
	if cfg.NoLaunchCounts {
		unit = "other CUDA calls"
	}
	loose := ""
	if tr.tol > tiers[0].tol {
		loose = "; step shapes vary, matched loosely"
	}
	_, _, within, afterData := clustersWithin(th.toks, c.m, cfg.NoLaunchCounts)
	return Boundary{PID: th.pid, TID: th.tid, m: c.m, Calls: c.m.String(), byCalls: cfg.NoLaunchCounts, seen: c.n, inCluster: within,
		afterData: 2*afterData >= c.n,
		Reason: fmt.Sprintf("%s %s a step, ~%d %s apart, seen %d times%s",
			reasonWord(c.m), c.m, c.median, unit, c.n, loose)}
}

func learnFixed(threads []*threadTokens, m matcher, cfg Config) (Boundary, bool) {
	var best *threadTokens
	bestN := 0
	for _, th := range threads {
		ends, _ := clusters(th.toks, m, cfg.NoLaunchCounts)
		if len(ends) > bestN {
			best, bestN = th, len(ends)
		}
	}
	if best == nil || bestN < 3 {
		return Boundary{}, false
	}
	_, _, within, afterData := clustersWithin(best.toks, m, cfg.NoLaunchCounts)
	return Boundary{PID: best.pid, TID: best.tid, m: m, Calls: m.String(), byCalls: cfg.NoLaunchCounts, seen: bestN, inCluster: within,
		afterData: 2*afterData >= bestN,
		Reason:    "--step-boundary; the thread making the most of these calls"}, true
}
