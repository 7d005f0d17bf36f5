package probes

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

// BenchmarkStackReads measures what reading stacks costs the programs
// that read them, by the kernel's BPF statistics (run time per run), on
// the stand-in pipeline under pyenv's 3.12 (compute mode: 100 launches
// and a sync a step): the same loop attached without stacks, and with
// every stack read (a launch stack at every launch, the stacks of every
// sync and copy, CPU samples at 97 Hz, off-CPU samples at 97 Hz). A
// launch's or a call's stack read is the difference between the two runs'
// programs; a CPU sample's is cpu_sample's whole run. The off-CPU
// programs run at every context switch (offcpu_leave) and every system
// call's return (offcpu_return) of every task on the machine, the
// target's or not: their cost is given a run, and in all, a second of
// the run.
//
//	sudo go test -run '^$' -bench StackReads -benchtime 1x ./probes
func BenchmarkStackReads(b *testing.B) {
	testenv.RequireRoot(b)
	python := testenv.EndToEndPython(b)
	dir := testenv.Fixtures(b)
	script := filepath.Join(testenv.Root(), "testdata", "python", "pipeline.py")
	type progCost struct{ perRun, perSecond float64 } // ns a run; ns of CPU a second of wall time
	perRun := func(stacks StackConfig) map[string]progCost {
		cfg := DefaultConfig()
		cfg.Launches, cfg.ProgramStats, cfg.Stacks = true, true, stacks
		s, err := Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		cmd := exec.Command(python, script, dir, "--mode", "compute", "--steps", "200", "--truth",
			filepath.Join(b.TempDir(), "truth.jsonl"), "--start-delay", "0.5")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		time.Sleep(300 * time.Millisecond)
		if _, err := s.Attach(cmd.Process.Pid); err != nil {
			b.Fatal(err)
		}
		began := time.Now()
		if _, err := runFor(b, s, 60*time.Second); !errors.Is(err, ErrTargetsExited) {
			b.Fatal(err)
		}
		wall := time.Since(began).Seconds()
		out := map[string]progCost{}
		for _, st := range s.objs.ProgramStats() {
			if st.Runs > 0 {
				out[st.Name] = progCost{float64(st.Runtime.Nanoseconds()) / float64(st.Runs), float64(st.Runtime.Nanoseconds()) / wall}
			}
		}
		return out
	}
	var off, on map[string]progCost
	for b.Loop() {
		off = perRun(StackConfig{})
		on = perRun(StackConfig{CPUHz: 97, OffCPUHz: 97, LaunchEvery: 1, Calls: true})
	}
	launch := on["launch_entry"].perRun - off["launch_entry"].perRun
	call := on["api_return"].perRun - off["api_return"].perRun
	b.Logf("ns a run, by BPF statistics: launch_entry %.0f without stacks, %.0f reading every launch's stack (+%.0f);"+
		" api_return %.0f, %.0f reading every sync's and copy's (+%.0f); cpu_sample %.0f a sample",
		off["launch_entry"].perRun, on["launch_entry"].perRun, launch, off["api_return"].perRun, on["api_return"].perRun, call, on["cpu_sample"].perRun)
	leave, ret := on["offcpu_leave"], on["offcpu_return"]
	b.Logf("off-CPU: offcpu_leave %.0f ns a context switch, offcpu_return %.0f ns a system call's return (stack reads included),"+
		" together %.0f µs of CPU a second, machine-wide", leave.perRun, ret.perRun, (leave.perSecond+ret.perSecond)/1e3)
	b.ReportMetric(launch, "launch-stack-ns")
	b.ReportMetric(call, "call-stack-ns")
	b.ReportMetric(on["cpu_sample"].perRun, "cpu-sample-ns")
	b.ReportMetric(leave.perRun, "offcpu-switch-ns")
	b.ReportMetric(ret.perRun, "offcpu-sysexit-ns")
	b.ReportMetric((leave.perSecond+ret.perSecond)/1e3, "offcpu-us/s")
}

// BenchmarkCPUClockCost measures what a cpu-clock sample costs the thread
// it interrupts, in wall time of fixed work on a locked thread: with no
// perf event, with one on every CPU running an empty program (bare_perf:
// the perf event's own cost), and with cpu_sample reading this process's
// stack (the process put in the profiled map). 10,000 samples a second
// make the difference measurable; gpuprof samples at 97. Windows
// alternate, and the median of each's ratio to the no-event windows
// beside it is taken, so the VM's drift cancels.
//
//	sudo go test -run '^$' -bench CPUClockCost -benchtime 1x ./probes
func BenchmarkCPUClockCost(b *testing.B) {
	testenv.RequireRoot(b)
	s, err := Open(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const hz = 10000
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	work := func() time.Duration {
		t0 := time.Now()
		x := uint64(1)
		for i := 0; i < 300_000_000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if x == 0 {
			b.Log(x)
		}
		return time.Since(t0)
	}
	withEvents := func(prog int) time.Duration {
		var fds []int
		for cpu := range runtime.NumCPU() {
			fd, err := openCPUClock(cpu, uint64(time.Second)/hz, prog)
			if err != nil {
				b.Fatalf("cpu-clock perf event on CPU %d: %v", cpu, err)
			}
			fds = append(fds, fd)
		}
		defer func() {
			for _, fd := range fds {
				unix.Close(fd)
			}
		}()
		return work()
	}
	if err := s.objs.Profiled.Put(uint32(os.Getpid()), uint8(1)); err != nil {
		b.Fatal(err)
	}
	perSample := func(on, off time.Duration) float64 {
		return float64(on-off) / (on.Seconds() * hz)
	}
	var bare, sample []float64
	for b.Loop() {
		for range 7 {
			off1 := work()
			tb := withEvents(s.objs.BarePerf.FD())
			off2 := work()
			ts := withEvents(s.objs.CpuSample.FD())
			off3 := work()
			bare = append(bare, perSample(tb, (off1+off2)/2))
			sample = append(sample, perSample(ts, (off2+off3)/2))
		}
	}
	slices.Sort(bare)
	slices.Sort(sample)
	b.Logf("ns of the interrupted thread's time a cpu-clock sample, median of %d: %.0f with an empty program, %.0f with cpu_sample reading the stack (each %v, %v)",
		len(bare), bare[len(bare)/2], sample[len(sample)/2], bare, sample)
	b.ReportMetric(bare[len(bare)/2], "bare-sample-ns")
	b.ReportMetric(sample[len(sample)/2], "cpu-sample-ns")
}
