package control

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
)

// Loop cuts a job's events into steps, one correlator a process, sends
// them to its output and, as each process's steps show what they need,
// tells its probes. attach, run and replay share it, so that a replay
// gives the steps the live run gave.
type Loop struct {
	cfg    Config
	probes Probes // nil: a replay, nothing to steer
	out    Output
	log    *slog.Logger
	waits  *waitKeeper
	procs  map[uint32]*proc
	// marks are the job-wide launch-probe markers so far (PID 0, older
	// traces), for a process seen later.
	marks []events.Event
	// ranks are the processes' ranks in a distributed job (KindProcess).
	ranks map[uint32]int
}

// LossSteps are the steps of a process that overlapped a loss of events
// (Step.LostEvents): First and Last their indexes, N how many.
type LossSteps struct {
	First, Last, N int
}

// proc is one process's steps and what its probes were last told.
type proc struct {
	corr      *correlate.Correlator
	boundary  correlate.Boundary // its boundary as last told
	waitNeeds WaitProbes         // what its steps needed of its wait probes as last told
	waitsTold bool               // the wait keeper was told of it at all
	clock     stepClock
	meter     launchMeter // its launch rate while its boundary is learned
	// before are its runs as the programs it ran before an exec, oldest
	// first (KindExec).
	before    []correlate.Summary
	lossSteps LossSteps // its steps marked with lost events
}

// New makes a loop that sends steps to out and steers p; p nil (a
// replay) only cuts steps.
func New(cfg Config, p Probes, out Output) (*Loop, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	l := &Loop{cfg: cfg, probes: p, out: out, log: log, procs: map[uint32]*proc{}}
	if p != nil {
		l.waits = newWaitKeeper(p, log)
	}
	return l, nil
}

// newCorrelator makes a process's correlator, with the job-wide markers
// so far.
func (l *Loop) newCorrelator() *correlate.Correlator {
	corr, _ := correlate.New(l.cfg.Correlate) // the config was checked in New
	for i := range l.marks {
		corr.Add(&l.marks[i])
	}
	return corr
}

// proc returns pid's steps, made on first use.
func (l *Loop) proc(pid uint32) *proc {
	p := l.procs[pid]
	if p == nil {
		p = &proc{corr: l.newCorrelator()}
		l.procs[pid] = p
		l.out.Processes(len(l.procs))
		l.shareBuffers()
	}
	return p
}

// PIDs are the processes seen, in order.
func (l *Loop) PIDs() []uint32 {
	out := make([]uint32, 0, len(l.procs))
	for pid := range l.procs {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

// Add takes the job's next event.
func (l *Loop) Add(e *events.Event) {
	switch e.Kind {
	case events.KindGPUSamples:
		// The job's GPUs, shared by its processes' correlators.
		if l.cfg.Correlate.GPUs != nil {
			l.cfg.Correlate.GPUs.Add(e.GPUs)
		}
		return
	case events.KindXid:
		if l.cfg.Correlate.GPUs != nil {
			l.cfg.Correlate.GPUs.AddXid(events.XidOf(e))
		}
		return
	case events.KindProcess:
		if e.Args[0] > 0 {
			if l.ranks == nil {
				l.ranks = map[uint32]int{}
			}
			l.ranks[e.PID] = int(e.Args[0] - 1)
		}
		return
	case events.KindKernelCount:
		return // a recorded run's last words, for the summaries
	case events.KindExec:
		l.execed(e)
		return
	}
	if e.Kind == events.KindLaunchProbes && e.PID == 0 {
		// Launch probes switched for every process at once (traces
		// recorded before each process had its own launch sampling).
		l.marks = append(l.marks, *e)
		for _, pid := range l.PIDs() {
			l.emit(l.procs[pid].corr.Add(e))
		}
		return
	}
	p := l.proc(e.PID)
	steps := p.corr.Add(e)
	if a, ok := p.corr.Boundary(); ok && (a.TID != p.boundary.TID || a.Calls != p.boundary.Calls) {
		first := p.boundary.TID == 0
		p.boundary = a
		l.out.Note(fmt.Sprintf("PID %d: step boundary: %s on thread %d (%s)", a.PID, a.Calls, a.TID, a.Reason))
		if l.probes != nil {
			l.boundaryFound(first, p.meter.sampled, a)
		}
	}
	if l.probes != nil {
		l.meterLaunches(e.PID, p, e)
	}
	if len(steps) > 0 && l.probes != nil {
		l.steer(e.PID, p, steps)
	}
	l.emit(steps)
}

// steer tells pid's probes what its latest steps show: how long they take,
// and which Python wait probes they need.
func (l *Loop) steer(pid uint32, p *proc, steps []correlate.Step) {
	if step, grown := p.clock.note(l.cfg.StepTimes, steps); grown {
		l.probes.FitLaunchPhases(int(pid), step)
	}
	if w, ok := p.corr.StepWaits(); ok {
		need := waitProbesFor(w)
		if !p.waitsTold || !need.Equal(p.waitNeeds) {
			p.waitNeeds, p.waitsTold = need, true
			l.waits.need(pid, need)
		}
	}
}

// Found says whether any process's step boundary was found.
func (l *Loop) Found() bool {
	for _, p := range l.procs {
		if p.boundary.TID != 0 {
			return true
		}
	}
	return false
}

// Finish cuts the last steps; the loop takes no more events.
func (l *Loop) Finish() {
	for _, pid := range l.PIDs() {
		l.emit(l.procs[pid].corr.Finish())
	}
}

func (l *Loop) emit(steps []correlate.Step) {
	for _, st := range steps {
		if r, ok := l.ranks[st.PID]; ok {
			st.Rank = &r
		}
		if l.cfg.LostEvents != nil {
			if st.LostEvents = l.cfg.LostEvents(st.StartNS, st.EndNS); st.LostEvents > 0 {
				l.markLoss(st)
			}
		}
		l.out.Step(st)
	}
}

// execed starts pid's steps afresh as the program it now runs: the old
// program's last steps are cut, its run kept (Before), and the new one's
// boundary is found again, as at an attach.
func (l *Loop) execed(e *events.Event) {
	p := l.procs[e.PID]
	if p == nil {
		return // no event of the old program came: nothing to let go of
	}
	l.emit(p.corr.Finish())
	before := p.before
	if run := p.corr.Summary(); run.Steps > 0 {
		before = append(before, run) // a launcher's shell had none to show
	}
	l.procs[e.PID] = &proc{corr: l.newCorrelator(), before: before, lossSteps: p.lossSteps}
	l.shareBuffers()
	l.out.Note(fmt.Sprintf("PID %d started a new program (exec): its steps are found again from here", e.PID))
}

// Before are pid's runs as the programs with steps it ran before an
// exec, oldest first; Summary is the program it runs now.
func (l *Loop) Before(pid uint32) []correlate.Summary {
	if p := l.procs[pid]; p != nil {
		return p.before
	}
	return nil
}

func (l *Loop) markLoss(st correlate.Step) {
	p := l.procs[st.PID]
	if p == nil {
		return
	}
	ls := &p.lossSteps
	if ls.N == 0 || st.Index < ls.First {
		ls.First = st.Index
	}
	ls.Last = max(ls.Last, st.Index)
	ls.N++
}

// The events the processes' correlators hold while they look for their
// boundaries share jobBuffer: each holds at most its share, never more
// than correlate.DefaultMaxBuffer (one process) nor less than
// minProcBuffer, so that a job of many processes, or one followed through
// many short-lived workers (--children), holds no more than ~300 MB
// (~300 bytes an event) until it has more than 256 processes, ~1.2 MB a
// process past that.
const (
	jobBuffer     = 1 << 20
	minProcBuffer = 1 << 12
)

// shareBuffers gives each process's correlator its share of jobBuffer.
func (l *Loop) shareBuffers() {
	if l.cfg.Correlate.MaxBuffer > 0 {
		return // set for all (tests)
	}
	share := min(correlate.DefaultMaxBuffer, max(minProcBuffer, jobBuffer/len(l.procs)))
	for _, p := range l.procs {
		p.corr.SetMaxBuffer(share)
	}
}

// LossSteps are pid's steps marked with lost events so far.
func (l *Loop) LossSteps(pid uint32) LossSteps {
	if p := l.procs[pid]; p != nil {
		return p.lossSteps
	}
	return LossSteps{}
}

// Summary is pid's run so far (a process not seen: an empty one).
func (l *Loop) Summary(pid uint32) correlate.Summary {
	if p := l.procs[pid]; p != nil {
		return p.corr.Summary()
	}
	return l.newCorrelator().Summary()
}

// KernelName is the name of pid's kernel of handle h, where it was seen
// loaded.
func (l *Loop) KernelName(pid uint32, h uint64) (string, bool) {
	if p := l.procs[pid]; p != nil {
		return p.corr.KernelName(pid, h)
	}
	return "", false
}

// Runs are the processes' runs, in order, with their ranks: the job's
// view (correlate.DiagnoseJob, correlate.Workers).
func (l *Loop) Runs() []correlate.ProcessRun {
	var runs []correlate.ProcessRun
	for _, pid := range l.PIDs() {
		r, ranked := l.ranks[pid]
		runs = append(runs, correlate.ProcessRun{PID: pid, Run: l.procs[pid].corr.Summary(), Rank: r, Ranked: ranked})
	}
	return runs
}
