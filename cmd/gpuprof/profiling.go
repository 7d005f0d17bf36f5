package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuprof/gpuprof/control"
	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/metrics"
	"github.com/gpuprof/gpuprof/profiles"
	"github.com/gpuprof/gpuprof/pyroscope"
)

// profileRecorder folds the events and steps into profiles (profiles/)
// and pushes each window as it completes (pyroscope/). The sink's
// goroutine owns it: every event passes through add before the control
// loop sees it, and every step the loop cuts through step.
type profileRecorder struct {
	b      *profiles.Builder
	push   *pyroscope.Pusher
	url    string
	series seriesLabels
	toWall func(mono uint64) time.Time
	nowNS  func() uint64         // the events' clock now
	clock  func(e *events.Event) // a replay's clock, moved on by each event; nil live
	// lastFlush is when windows were last looked for: every flushEvery.
	lastFlush time.Time
	pushed    map[profiles.Type]uint64
}

const flushEvery = time.Second

// monoToWall converts CLOCK_MONOTONIC ns, the events' clock, to the wall
// clock, reading the offset between the two once.
func monoToWall() (func(uint64) time.Time, func() uint64) {
	now := func() uint64 {
		var ts unix.Timespec
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
		return uint64(ts.Nano())
	}
	offset := time.Now().UnixNano() - int64(now())
	return func(mono uint64) time.Time { return time.Unix(0, int64(mono)+offset) }, now
}

// startProfiles starts the profiles where --pyroscope asks for them (nil
// where not), the service named from the first target's command line.
func startProfiles(f *pyroscopeFlags, loop *control.Loop, pids []int, gw *gpuWatch) (*profileRecorder, error) {
	if !f.enabled() {
		return nil, nil
	}
	var cmdline []string
	if len(pids) > 0 {
		cmdline, _ = procCmdline(pids[0]) // gone: the default name
	}
	cfg, err := f.config(cmdline)
	if err != nil {
		return nil, err
	}
	toWall, now := monoToWall()
	return newProfileRecorder(cfg, f.interval, loop.KernelName, toWall, now, gw.groups)
}

// replayProfiles pushes a recorded trace's profiles where --pyroscope
// asks (nil where not), shifted so that its last event is now: the
// server refuses profiles more than an hour old. The service is named
// from the trace's first process's command line, where the trace's
// events hold none, "replay".
func replayProfiles(f *pyroscopeFlags, loop *control.Loop, h events.TraceHeader, evs []events.Event) (*profileRecorder, error) {
	if !f.enabled() {
		return nil, nil
	}
	cmdline := []string{"replay"}
	cfg, err := f.config(cmdline)
	if err != nil {
		return nil, err
	}
	var last uint64
	for i := range evs {
		last = max(last, evs[i].End)
	}
	offset := time.Now().UnixNano() - int64(last)
	toWall := func(mono uint64) time.Time { return time.Unix(0, int64(mono)+offset) }
	// The trace's clock stands still once read: windows are complete
	// when its steps pass them, and at the end.
	cur := uint64(0)
	rec, err := newProfileRecorder(cfg, f.interval, loop.KernelName, toWall, func() uint64 { return cur }, nil)
	if err != nil {
		return nil, err
	}
	rec.clock = func(e *events.Event) { cur = max(cur, e.End) }
	return rec, nil
}

// withUploads adds the profile uploads' counts to the health metrics.
func withUploads(health func() metrics.Health, rec *profileRecorder) func() metrics.Health {
	if rec == nil {
		return health
	}
	return func() metrics.Health {
		h := health()
		h.Uploads = rec.health()
		return h
	}
}

// newProfileRecorder starts pushing to the server cfg names.
func newProfileRecorder(cfg pyroscope.Config, interval time.Duration, kernelName func(uint32, uint64) (string, bool),
	toWall func(uint64) time.Time, nowNS func() uint64, groups []correlate.NamedGPUs) (*profileRecorder, error) {
	host, _ := os.Hostname()
	if cfg.Labels == nil {
		cfg.Labels = map[string]string{}
	}
	if _, ok := cfg.Labels["host"]; !ok {
		cfg.Labels["host"] = host
	}
	push, err := pyroscope.New(cfg, slog.Default())
	if err != nil {
		return nil, err
	}
	b := profiles.New(profiles.Config{Interval: interval, KernelName: kernelName, Clock: toWall})
	return &profileRecorder{b: b, push: push, url: cfg.URL, toWall: toWall, nowNS: nowNS,
		series: seriesLabels{procs: map[uint32]*procSeries{}, groups: groups}, pushed: map[profiles.Type]uint64{},
		lastFlush: time.Now()}, nil
}

func (r *profileRecorder) add(e *events.Event) {
	if r.clock != nil {
		r.clock(e)
	}
	r.series.note(e)
	r.b.Add(e)
}

// Step takes each step the loop cuts (profileRecorder is a control.Output).
func (r *profileRecorder) Step(s correlate.Step) {
	if s.Rank != nil {
		r.series.proc(s.PID).rank = strconv.Itoa(*s.Rank)
	}
	r.b.Step(s)
}

func (r *profileRecorder) Note(string)   {}
func (r *profileRecorder) Processes(int) {}

// tick pushes the windows complete, every flushEvery.
func (r *profileRecorder) tick(now time.Time) {
	if now.Sub(r.lastFlush) < flushEvery {
		return
	}
	r.lastFlush = now
	r.send(r.b.Flush(r.nowNS(), false))
}

func (r *profileRecorder) send(ps []profiles.Profile) {
	for _, p := range ps {
		r.push.Push(pyroscope.Upload{Labels: r.series.labels(p.PID),
			Start: r.toWall(p.StartNS), End: r.toWall(p.EndNS), Profile: p.Prof})
		r.pushed[p.Type]++
	}
}

// close pushes what is left and waits for the uploads, within the
// pusher's bound (pyroscope.CloseBound) whatever the server does.
func (r *profileRecorder) close() error {
	r.send(r.b.Flush(r.nowNS(), true))
	ctx, cancel := context.WithTimeout(context.Background(), pyroscope.CloseBound)
	defer cancel()
	return r.push.Close(ctx)
}

// health is the uploads' counts for the metrics.
func (r *profileRecorder) health() []metrics.Uploads {
	st := r.push.Stats()
	return []metrics.Uploads{{Type: "all", OK: st.Sent, Failed: st.FailedTotal(), Dropped: st.DroppedTotal()}}
}

// writeSummary says what became of the profiles.
func (r *profileRecorder) writeSummary(w io.Writer) {
	st, bs := r.push.Stats(), r.b.Stats()
	var types []string
	for _, t := range []profiles.Type{profiles.TypeCPU, profiles.TypeWait, profiles.TypeGPU} {
		types = append(types, fmt.Sprintf("%d %s", r.pushed[t], t))
	}
	fmt.Fprintf(w, "profiles: %s to %s: %d sent, %d failed, %d dropped", strings.Join(types, ", "), r.url,
		st.Sent, st.FailedTotal(), st.DroppedTotal())
	if st.LastError != "" && st.Sent < st.Pushed {
		fmt.Fprintf(w, " (last error: %s)", st.LastError)
	}
	fmt.Fprintln(w)
	if n := bs.StepsCovered + bs.StepsCarried + bs.StepsNoStacks; n > 0 {
		fmt.Fprintf(w, "  GPU profile: %d of %d steps (%d of them by the next step's stacks, none of theirs sampled), %.3f of %.3f s of their GPU time (launch stacks are read while launches are counted)\n",
			bs.StepsCovered+bs.StepsCarried, n, bs.StepsCarried, float64(bs.GPUCoveredNS)/1e9, float64(bs.GPUCoveredNS+bs.GPUNoStacksNS)/1e9)
	}
	if lost := bs.StacksFolded + bs.SamplesFolded + bs.Late + bs.Unplaced; lost > 0 {
		fmt.Fprintf(w, "  %d stacks and %d samples folded into [other stacks], %d late, %d placed without their step\n",
			bs.StacksFolded, bs.SamplesFolded, bs.Late, bs.Unplaced)
	}
}

// seriesLabels are the series labels of each process's profiles: pid,
// rank (from its environment or its steps), gpu (the GPUs it has a
// context on, by NVML) and group (the --group holding them).
type seriesLabels struct {
	procs  map[uint32]*procSeries
	groups []correlate.NamedGPUs
}

type procSeries struct {
	rank string
	gpus []int
}

func (s *seriesLabels) proc(pid uint32) *procSeries {
	p := s.procs[pid]
	if p == nil {
		p = &procSeries{}
		s.procs[pid] = p
	}
	return p
}

func (s *seriesLabels) note(e *events.Event) {
	switch e.Kind {
	case events.KindProcess:
		if e.Args[0] > 0 {
			s.proc(e.PID).rank = strconv.FormatUint(e.Args[0]-1, 10)
		}
	case events.KindGPUSamples:
		for _, g := range e.GPUs {
			for _, pr := range g.Procs {
				if p := s.proc(pr.PID); !slices.Contains(p.gpus, g.GPU) {
					p.gpus = append(p.gpus, g.GPU)
					slices.Sort(p.gpus)
				}
			}
		}
	}
}

func (s *seriesLabels) labels(pid uint32) map[string]string {
	l := map[string]string{"pid": strconv.FormatUint(uint64(pid), 10)}
	p := s.procs[pid]
	if p == nil {
		return l
	}
	if p.rank != "" {
		l["rank"] = p.rank
	}
	if len(p.gpus) > 0 {
		parts := make([]string, len(p.gpus))
		for i, g := range p.gpus {
			parts[i] = strconv.Itoa(g)
		}
		l["gpu"] = strings.Join(parts, "_") // a label value holds no ","
		for _, g := range s.groups {
			if slices.ContainsFunc(p.gpus, func(i int) bool { return slices.Contains(g.GPUs, i) }) {
				l["group"] = g.Name
				break
			}
		}
	}
	return l
}
