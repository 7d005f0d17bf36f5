package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/gpuprof/gpuprof/control"
	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/probes"
	"github.com/gpuprof/gpuprof/report"
)

// profileFlags are the flags attach and run share.
type profileFlags struct {
	duration    time.Duration
	jsonl       string
	record      string
	boundary    string
	thread      uint32
	noLaunches  bool
	launchDuty  float64
	learnBudget float64
	noCalls     bool
	noPython    bool
	wholeGets   bool
	// recordSites: records probed at their readers' call sites once
	// steps are found (probes/recordsites.go).
	recordSites bool
	poolEvery   time.Duration
	probeStats  bool
	rescan      time.Duration
	quiet       bool
	preset      string
	probeSpecs  []string
	batchSize   int
	children    bool
	normalPrio  bool
	gpu         gpuFlags
	metrics     metricsFlags
	pyroscope   pyroscopeFlags
	stacks      stackFlags
	pictures    pictureFlags
	memory      memoryFlags

	// parsed from preset and probeSpecs
	user  []probes.UserProbe
	roles map[uint16]correlate.UserProbe

	view *topScreen // gpuprof top's screen, in the live line's place (nil: the line)
}

func (f *profileFlags) register(fs *pflag.FlagSet) {
	fs.DurationVarP(&f.duration, "duration", "d", 0, "stop after this long (0: until the target exits or Ctrl-C)")
	fs.StringVar(&f.jsonl, "jsonl", "", "write one JSON object per step to this file")
	fs.StringVar(&f.record, "record", "", "record every event to this trace file (.gz to compress), for gpuprof replay")
	fs.StringVar(&f.boundary, "step-boundary", "", "the CUDA call whose return ends a step, e.g. cudaStreamSynchronize or cudaMemcpyAsync:h2d (default: found)")
	fs.Uint32Var(&f.thread, "step-thread", 0, "the thread whose steps to report (default: found)")
	fs.BoolVar(&f.noLaunches, "no-launches", false, "do not count kernel launches (for launch-bound loops, where a probe on every launch costs several percent)")
	fs.Float64Var(&f.launchDuty, "launch-duty", control.DefaultLaunchDuty, "once steps are found, count launches this fraction of the time, 1 s at a time or 2.5 steps where those are longer (1 s of every 40 at 0.025); 1 counts every launch, at ~0.9 µs a launch")
	fs.Float64Var(&f.learnBudget, "learn-budget", control.DefaultLearnBudget, "until a process's steps are found, where probing every launch, Python wait and kernel lookup would cost it more than this fraction of its time (~0.9 µs a launch, ~2.1 µs a wait or lookup), probe them only a share of the time that costs about this; 1 probes every one")
	fs.BoolVar(&f.noCalls, "no-calls", false, "do not probe CUDA calls (syncs, copies, events, memory); with --no-launches only the loader hook stays, for measuring gpuprof's own cost")
	fs.BoolVar(&f.noPython, "no-python", false, "do not time Python lock waits (queue gets, events)")
	fs.BoolVar(&f.wholeGets, "whole-gets", true, "time multiprocessing queue gets whole (uprobes on the C functions a get calls first and last: its lock and the unpickling; where those are not found, a hardware watchpoint, two debug traps a get), so that unpickling what was got, and rebuilding a shared tensor, counts as the wait; --whole-gets=false times only their blocking")
	fs.BoolVar(&f.recordSites, "record-sites", true, "once steps are found, probe CUDA event records only at the call sites whose events the job reads (elapsed-time reads), so that a library's own records (DDP's and NCCL's, ~50 a DDP step) trap no more; false probes every record")
	fs.DurationVar(&f.rescan, "rescan-interval", probes.DefaultConfig().Rescan, "how often the targets' memory maps are re-read for new CUDA libraries, besides when the loader says one was opened")
	fs.DurationVar(&f.poolEvery, "pool-interval", probes.DefaultConfig().PoolInterval, "how often the sample pool's length is polled from the job's memory while the BPF programs are not reading it at the job's call returns")
	fs.StringArrayVar(&f.probeSpecs, "probe", nil, "time a function: ROLE=LIB:SYMBOL (native; LIB part of the library's path, SYMBOL a C++ name or a symbol) or ROLE=py:MODULE:QUALNAME (Python 3.10-3.13, hardware watchpoints: two debug traps a call; multiprocessing's queue gets by uprobes); ROLE one of dispatch, data, fetch, compute, infer, step, get (a whole get: a wait of the kind of the waits inside it) (repeat for several)")
	fs.StringVar(&f.preset, "preset", "", "probes for a kind of job: "+presetNames())
	fs.IntVar(&f.batchSize, "batch-size", 0, "samples a step trains on, for train_capacity and thru")
	fs.BoolVar(&f.children, "children", false, "follow the targets' child processes too (ranks, DataLoader workers, engines)")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no live line")
	f.gpu.register(fs)
	f.metrics.register(fs)
	f.pyroscope.register(fs)
	f.stacks.register(fs)
	f.pictures.register(fs)
	f.memory.register(fs)
	fs.BoolVar(&f.normalPrio, "normal-sched", false, "run gpuprof's threads under the normal scheduling policy (default: SCHED_BATCH, so that they never preempt the job's threads as they wake)")
	fs.BoolVar(&f.probeStats, "probe-stats", false, "at the end, print how often each BPF program ran, for how long, and what the runs cost the job's threads at least with their traps (turns on the kernel's BPF statistics while attached)")
}

func (f *profileFlags) correlateConfig() correlate.Config {
	return correlate.Config{Boundary: f.boundary, Thread: f.thread, NoLaunchCounts: f.noLaunches, User: f.roles,
		BatchSize: f.batchSize}
}

// cpuOnlyAfter is how long a Python process runs with no CUDA library
// before its wait probes are thinned (probes.Config.CPUOnlyAfter): a
// trainer importing torch loads CUDA within seconds, and its waits until
// then give no step.
const cpuOnlyAfter = 5 * time.Second

// controlConfig is the control loop's policy for the flags, its
// correlators joining steps with gpus (nil: no GPU state).
func (f *profileFlags) controlConfig(gpus *correlate.GPUs) control.Config {
	cfg := control.DefaultConfig()
	cfg.Correlate = f.correlateConfig()
	cfg.Correlate.GPUs = gpus
	cfg.LaunchDuty = f.launchDuty
	cfg.LearnBudget = f.learnBudget
	cfg.RecordSites = f.recordSites
	return cfg
}

// openSession checks privileges and loads the probes.
func openSession(f *profileFlags) (*probes.Session, error) {
	if f.launchDuty < 0 || f.launchDuty > 1 {
		return nil, usageErr("--launch-duty %g: give a fraction from 0 to 1", f.launchDuty)
	}
	if f.learnBudget < 0 || f.learnBudget > 1 {
		return nil, usageErr("--learn-budget %g: give a fraction from 0 to 1", f.learnBudget)
	}
	if err := f.memory.apply(); err != nil {
		return nil, err
	}
	var err error
	if f.user, f.roles, err = userProbes(f.preset, f.probeSpecs); err != nil {
		return nil, err
	}
	if f.wholeGets && !f.noPython {
		f.user = addWholeGets(f.user, f.roles)
	}
	for _, u := range f.user {
		if _, _, py := u.Python(); py && f.noPython {
			return nil, usageErr("--probe %s times a Python function: leave out --no-python", u.Spec())
		}
	}
	if _, err := correlate.New(f.correlateConfig()); err != nil {
		return nil, err
	}
	if err := f.checkInput(); err != nil {
		return nil, err
	}
	if err := probes.CheckPrivileges(); err != nil {
		return nil, err
	}
	if f.poolEvery <= 0 {
		return nil, usageErr("--pool-interval %v: give a positive duration, e.g. 10ms", f.poolEvery)
	}
	cfg := probes.DefaultConfig()
	cfg.PoolInterval = f.poolEvery
	if f.rescan <= 0 {
		return nil, usageErr("--rescan-interval %v: give a positive duration, e.g. 1s", f.rescan)
	}
	cfg.Rescan = f.rescan
	cfg.Launches = !f.noLaunches
	cfg.NoCalls = f.noCalls
	cfg.NoPython = f.noPython
	cfg.User = f.user
	cfg.Children = f.children
	cfg.CountWaits, cfg.ProgramStats = f.probeStats, f.probeStats
	if f.launchDuty < 1 {
		// A process that has loaded no CUDA by then (a CPU-only producer)
		// has its Python wait probes thinned like launches.
		cfg.CPUOnlyAfter = cpuOnlyAfter
		cfg.CPUOnlyPeriod, cfg.CPUOnlyOn = f.controlConfig(nil).LaunchCycle()
	}
	// The --pyroscope flags checked before anything is attached (the
	// service is named from the job later).
	if _, err := f.pyroscope.config(nil); err != nil {
		return nil, err
	}
	if cfg.Stacks, err = f.stacks.config(f.pyroscope.enabled()); err != nil {
		return nil, err
	}
	if err := f.pictures.check(); err != nil {
		return nil, err
	}
	// Before anything is attached or started: a port in use fails now.
	if err := f.metrics.listen(); err != nil {
		return nil, err
	}
	sess, err := probes.Open(cfg)
	if err != nil {
		f.metrics.close()
		return nil, keepVerifierLog(err)
	}
	return sess, nil
}

// profile follows the attached targets until ctx ends, the duration passes
// or every target exits, then prints the summary.
func profile(ctx context.Context, sess *probes.Session, pids []int, f *profileFlags, gw *gpuWatch, stdout, stderr io.Writer) error {
	live := report.NewLive(stderr, isTerminal(stderr))
	if f.quiet {
		live = report.NewLive(io.Discard, false)
	}
	outs := &stepOutputs{live: live}
	if f.view != nil {
		live, outs = f.view.outputs()
	}
	defer f.metrics.close()
	loopCfg := f.controlConfig(gw.state)
	loopCfg.LostEvents = sess.LostBetween
	loop, err := control.New(loopCfg, steer(sess), outs)
	if err != nil {
		return err
	}
	rec, err := startProfiles(&f.pyroscope, loop, pids, gw)
	if err != nil {
		return err
	}
	exp, err := f.metrics.serve(gw, f.gpu.interval, withUploads(sessionHealth(sess, gw), rec), live)
	if err != nil {
		return err
	}
	if exp != nil {
		outs.more = append(outs.more, exp)
	}
	if rec != nil {
		outs.more = append(outs.more, rec)
	}
	if err := outs.openJSONL(f.jsonl); err != nil {
		return err
	}
	pics, err := openPictures(f.pictures, f.roles, threadComm)
	if err != nil {
		return err
	}
	title := commandTitle(pids) // now: the job may be gone at the end
	outs.more = append(outs.more, pics.outputs()...)
	// finish cuts the last steps and closes their outputs.
	finish := func() error {
		loop.Finish()
		return outs.close()
	}
	gw.follow = sess.Follow
	var trace *events.TraceWriter
	if f.record != "" {
		h := events.TraceHeader{Version: version, NoLaunchCounts: f.noLaunches}
		if gw.sampler != nil {
			h.GPUs, h.NVMLIntervalNS = gw.sampler.GPUs(), uint64(f.gpu.interval)
		}
		for _, u := range f.user {
			h.UserProbes = append(h.UserProbes, u.Spec())
		}
		for _, p := range pids {
			h.PIDs = append(h.PIDs, uint32(p))
		}
		if trace, err = events.CreateTrace(f.record, h); err != nil {
			finish()
			return errors.Join(err, pics.abandon())
		}
		defer trace.Close()
	}
	for _, pid := range pids {
		for _, lp := range sess.Libraries(pid) {
			noteAttached(live, lp)
		}
		if !sess.CUDALoaded(pid) {
			live.Note(fmt.Sprintf("waiting for PID %d to load a CUDA library (libcudart.so or libcuda.so.1); Ctrl-C to stop", pid))
		}
	}
	if f.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.duration)
		defer cancel()
	}
	out := &sink{trace: trace, loop: loop, metrics: exp, profiles: rec, taps: pics.taps()}
	if f.view != nil {
		out.taps = append(out.taps, f.view.model)
	}
	stopGPUs := gw.run(ctx, out.add, func(x events.Xid) { out.add(x.Event()) })
	start := time.Now()
	var lost uint64
	lastCheck := start
	onBatch := func(batch []events.Event, attached []probes.LibraryPlan) {
		for _, lp := range attached {
			noteAttached(live, lp)
		}
		// Say so as soon as events are lost, not only in the summary.
		if now := time.Now(); now.Sub(lastCheck) >= time.Second {
			lastCheck = now
			if n := sess.Stats().Lost(); n > lost {
				live.Note(fmt.Sprintf("gpuprof: %d events lost so far (ring buffer full): steps around them may be merged", n))
				lost = n
			}
		}
		out.add(batch...)
	}
	runErr := sess.Run(ctx, onBatch)
	if runErr == nil {
		// -d or Ctrl-C ended it with the targets running: detach and read
		// what is left, so that the summary accounts for every event. Of
		// those, the ones that ended after the detach began are counted
		// (delivered) but not cut into steps: the probes go one link at a
		// time, so a step in flight is seen in part (its data wait's
		// return unprobed, its syncs still probed), which would be cut as
		// a step of its own or merged into the one before it.
		_, now := monoToWall()
		detachAt := now()
		runErr = sess.Drain(func(batch []events.Event, attached []probes.LibraryPlan) {
			onBatch(slices.DeleteFunc(batch, func(e events.Event) bool { return e.End > detachAt }), attached)
		})
	}
	stopGPUs()
	kl, _ := sess.KernelLaunches()
	if trace != nil && out.traceErr == nil {
		_, now := monoToWall()
		out.traceErr = recordKernelCounts(trace, kl, now())
	}
	if trace != nil && out.traceErr == nil {
		out.traceErr = trace.Close() // its last write: a full disk shows here
	}
	outErr := finish()
	if rec != nil {
		outErr = errors.Join(outErr, rec.close())
	}
	if errors.Is(runErr, probes.ErrTargetsExited) {
		all := sess.PIDs() // with the processes followed (--children, --gpus)
		slices.Sort(all)
		fmt.Fprintf(stderr, "gpuprof: %s exited\n", pidList(all))
		runErr = nil
	}
	sampling := ""
	if loop.Found() && f.launchDuty < 1 && !f.noLaunches {
		period, on := loopCfg.LaunchCycle()
		sampling = fmt.Sprintf("%v in every %v once steps were found", on, period)
		if on == 0 {
			sampling = "not once steps were found (--launch-duty 0)"
		}
	}
	attached := time.Since(start)
	writeSummaries(stdout, sess, loop, attached, sampling)
	f.metrics.writeSummary(stdout)
	if rec != nil {
		rec.writeSummary(stdout)
	}
	var gpuRuns []correlate.GPURun
	if gw.state != nil {
		gpuRuns = gw.state.Runs()
		report.WriteGPUs(stdout, gpuRuns, correlate.Groups(gpuRuns, gw.groups), gw.views)
	}
	loss := sessionLoss(sess.Stats(), loop)
	info := runInfo{title: title, source: "attached to " + pidList(pids), attached: attached.Seconds(),
		kernels: kernelCounts(kl, loop), gpus: gpuRuns, loss: &loss}
	outErr = errors.Join(outErr, pics.close(loop, info, stdout))
	if f.probeStats {
		progs, waits, err := sess.ProbeStats()
		if err != nil {
			return errors.Join(runErr, outErr, out.traceErr, err)
		}
		writeProbeStats(stdout, progs, attached)
		writeWaitCounts(stdout, waits, attached)
	}
	return errors.Join(runErr, outErr, out.traceErr)
}

// pidList names processes, the first eight of them.
func pidList(pids []int) string { return report.PIDList(pids, 8) }

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// stepBack runs gpuprof on few CPUs (boundProcs) and behind the job
// (runBehindTheJob) unless --normal-sched; a failure is only worth a
// warning.
func (f *profileFlags) stepBack() {
	boundProcs()
	if f.normalPrio {
		return
	}
	if err := runBehindTheJob(); err != nil {
		slog.Warn("gpuprof runs at the normal scheduling policy", "err", err)
	}
}
