package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/nvml"
)

// gpuFlags say which GPUs' hardware state is read (NVML) and how.
type gpuFlags struct {
	noNVML   bool
	interval time.Duration
	gpm      time.Duration
	groups   []string
}

func (g *gpuFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&g.noNVML, "no-nvml", false, "do not read the GPUs' hardware state (NVML)")
	fs.DurationVar(&g.interval, "nvml-interval", 100*time.Millisecond, "how often each GPU's hardware state is read (NVML, apart from CUDA)")
	fs.DurationVar(&g.gpm, "nvml-gpm-interval", 500*time.Millisecond, "how often GPM (SM, tensor and DRAM activity, Hopper and newer) is sampled, at most; 0: no GPM")
	fs.StringArrayVar(&g.groups, "group", nil, "name a set of GPUs for per-group aggregates, e.g. target=0-4 (repeat for several)")
}

// gpuWatch samples the GPUs for a profile: a sampler (nil where NVML is
// missing or off) and the state the correlators join steps with.
type gpuWatch struct {
	sampler *nvml.Sampler
	state   *correlate.GPUs
	groups  []correlate.NamedGPUs
	views   map[uint32][]int // per process, the NVML index of each CUDA ordinal (noteViews)
	// watched are the GPUs of attach --gpus (processes): a process that
	// opens a context on one of them later is attached to as well (follow).
	watched []int
	follow  func(pid int)
	seen    map[uint32]bool
}

// openGPUs starts reading every GPU's hardware state (a job's processes
// and its --group sets may span more GPUs than attach --gpus named).
// Without NVML it warns once and profiling goes on without it, unless
// forGPUs (attach --gpus) or a --group needs it; a bad --group is an error.
func openGPUs(g *gpuFlags, forGPUs bool) (*gpuWatch, error) {
	if g.interval <= 0 {
		return nil, usageErr("--nvml-interval %v: give a positive duration, e.g. 100ms", g.interval)
	}
	if g.noNVML {
		if len(g.groups) > 0 || forGPUs {
			return nil, usageErr("--group and --gpus need NVML: leave out --no-nvml")
		}
		return &gpuWatch{}, nil
	}
	if g.gpm < 0 {
		return nil, usageErr("--nvml-gpm-interval %v: give a duration, 0 for no GPM", g.gpm)
	}
	gpm := g.gpm
	if gpm == 0 {
		gpm = -1 // nvml.Config's "no GPM"
	}
	s, err := nvml.New(nvml.Open(), nvml.Config{Interval: g.interval, GPMEvery: gpm})
	if err != nil {
		if forGPUs {
			return nil, fmt.Errorf("--gpus needs NVML: %w", err)
		}
		if len(g.groups) > 0 {
			return nil, err
		}
		slog.Warn("GPU hardware state left out", "err", err)
		return &gpuWatch{}, nil
	}
	w := &gpuWatch{sampler: s, state: correlate.NewGPUs(s.GPUs(), g.interval), views: map[uint32][]int{},
		seen: map[uint32]bool{}}
	for _, spec := range g.groups {
		name, list, ok := strings.Cut(spec, "=")
		if !ok || name == "" {
			s.Close()
			return nil, usageErr("--group %q: give NAME=GPUS, e.g. target=0-4", spec)
		}
		gpus, err := nvml.ParseGPUs(list, len(s.GPUs()))
		if err != nil {
			s.Close()
			return nil, usageErr("--group %s: %v", name, err)
		}
		if slices.ContainsFunc(w.groups, func(n correlate.NamedGPUs) bool { return n.Name == name }) {
			s.Close()
			return nil, usageErr("--group %s given twice", name)
		}
		w.groups = append(w.groups, correlate.NamedGPUs{Name: name, GPUs: gpus})
	}
	return w, nil
}

// run samples until ctx ends, handing each round to add as an event (from
// a goroutine of its own: add serialises it with the probes' events), and
// each Xid to xid.
func (w *gpuWatch) run(ctx context.Context, add func(...events.Event), xid func(events.Xid)) (stop func()) {
	if w.sampler == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{}, 2)
	go func() {
		defer func() { done <- struct{}{} }()
		w.sampler.Run(ctx, func(round []events.GPUSample) {
			w.noteViews(round)
			w.followNew(round)
			add(events.Event{Kind: events.KindGPUSamples, End: round[0].TimeNS, GPUs: round})
		})
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		w.sampler.WatchXids(ctx, func(x events.Xid) {
			slog.Warn("Xid error", "gpu", x.GPU, "xid", x.Code)
			xid(x)
		})
	}()
	return func() {
		cancel()
		<-done
		<-done
	}
}

func (w *gpuWatch) close() {
	if w.sampler != nil {
		w.sampler.Close()
	}
}

// processes returns the processes with a compute context on any of the
// GPUs spec names (attach --gpus), from NVML, and watches those GPUs for
// processes that come later.
func (w *gpuWatch) processes(spec string) ([]int, error) {
	gpus, err := nvml.ParseGPUs(spec, len(w.sampler.GPUs()))
	if err != nil {
		return nil, usageErr("--gpus: %v", err)
	}
	procs, err := w.sampler.ComputeProcesses()
	if err != nil {
		return nil, err
	}
	var pids []int
	for pid, on := range procs {
		if slices.ContainsFunc(on, func(g int) bool { return slices.Contains(gpus, g) }) {
			pids = append(pids, int(pid))
		}
	}
	slices.Sort(pids)
	w.watched = gpus
	return pids, nil
}

// waitProcesses is processes, waiting while there are none yet (gpuprof
// started alongside a job whose ranks are still loading their models),
// up to limit (0: until ctx ends). It returns how long it waited.
func (w *gpuWatch) waitProcesses(ctx context.Context, spec string, limit time.Duration, note func(string)) ([]int, time.Duration, error) {
	start := time.Now()
	for noted := false; ; noted = true {
		pids, err := w.processes(spec)
		if err != nil || len(pids) > 0 {
			return pids, time.Since(start), err
		}
		if !noted {
			note(fmt.Sprintf("waiting for a process to open a compute context on GPU %s (nvidia-smi lists the GPUs' processes); Ctrl-C to stop", spec))
		}
		waited := time.Since(start)
		if limit > 0 && waited >= limit {
			return nil, waited, fmt.Errorf("no process opened a compute context on GPU %s in %v: start the job, or give --pid", spec, limit)
		}
		select {
		case <-ctx.Done():
			return nil, waited, fmt.Errorf("stopped before any process opened a compute context on GPU %s", spec)
		case <-time.After(processPoll):
		}
	}
}

// processPoll is how often attach --gpus asks NVML for processes while it
// waits for the first.
const processPoll = 500 * time.Millisecond

// followNew attaches to the processes that opened a context on a watched
// GPU since attach --gpus looked (a rank that loads its model late).
func (w *gpuWatch) followNew(round []events.GPUSample) {
	if w.follow == nil || len(w.watched) == 0 {
		return
	}
	for _, smp := range round {
		if !slices.Contains(w.watched, smp.GPU) {
			continue
		}
		for _, p := range smp.Procs {
			if !w.seen[p.PID] {
				w.seen[p.PID] = true
				w.follow(int(p.PID))
			}
		}
	}
}

// noteViews reads, for each process first seen on a GPU, which NVML GPU
// each of its CUDA ordinals is (its CUDA_VISIBLE_DEVICES), so that the
// summary can name a GPU as the job names it. Read while the process runs:
// by the summary it may be gone.
func (w *gpuWatch) noteViews(round []events.GPUSample) {
	for _, smp := range round {
		for _, p := range smp.Procs {
			if _, done := w.views[p.PID]; done {
				continue
			}
			w.views[p.PID] = nil
			env, err := environ(p.PID)
			if err != nil {
				continue // gone, or not ours to read
			}
			visible := env["CUDA_VISIBLE_DEVICES"]
			if view, err := nvml.CUDAView(visible, w.sampler.GPUs()); err == nil {
				w.views[p.PID] = view
			}
		}
	}
}
