package probes

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
	"golang.org/x/sys/unix"
)

func TestSplitSampled(t *testing.T) {
	probe := func(name string) Probe {
		a, ok := cudaapi.ByName(name)
		if !ok {
			t.Fatalf("no %s", name)
		}
		return Probe{API: a}
	}
	names := func(lp LibraryPlan) []string {
		var out []string
		for _, p := range lp.Probes {
			out = append(out, p.API.Name)
		}
		return out
	}
	driver := LibraryPlan{Layer: cudaapi.LayerDriver, Probes: []Probe{probe("cuLaunchKernel"), probe("cuMemcpyDtoDAsync_v2"),
		probe("cuMemcpyDtoD_v2"), probe("cuMemcpyHtoDAsync_v2"), probe("cuEventRecord"), probe("cuKernelGetFunction"),
		probe("cuLibraryGetKernel")}}
	calls, sampled := splitSampled(driver, true)
	if got := fmt.Sprint(names(sampled)); got != "[cuLaunchKernel cuMemcpyDtoDAsync_v2 cuMemcpyDtoD_v2 cuKernelGetFunction]" {
		t.Errorf("driver, launches counted: sampled %s, want the launch, the device-to-device copies and the kernel lookups", got)
	}
	if got := fmt.Sprint(names(calls)); got != "[cuMemcpyHtoDAsync_v2 cuEventRecord cuLibraryGetKernel]" {
		t.Errorf("driver, launches counted: calls %s", got)
	}
	calls, sampled = splitSampled(driver, false)
	if got := fmt.Sprint(names(sampled)); got != "[cuLaunchKernel]" || len(calls.Probes) != 6 {
		t.Errorf("driver, --no-launches: sampled %s, calls %v; want the copies with the calls", got, names(calls))
	}
	// The runtime's one copy entry point carries every direction: it stays.
	runtime := LibraryPlan{Layer: cudaapi.LayerRuntime, Probes: []Probe{probe("cudaMemcpyAsync"), probe("cudaEventRecord")}}
	calls, sampled = splitSampled(runtime, true)
	if fmt.Sprint(names(calls)) != "[cudaMemcpyAsync cudaEventRecord]" || len(sampled.Probes) != 0 {
		t.Errorf("runtime: calls %v, sampled %v", names(calls), names(sampled))
	}
}

// TestDeviceCopiesGoWithLaunches: a device-to-device copy straight to the
// driver is reported while launches are counted in full, and not once
// launch counting pauses.
func TestDeviceCopiesGoWithLaunches(t *testing.T) {
	s := openSession(t)
	h := startHitloop(t, "cuMemcpyDtoDAsync_v2")
	pid := h.cmd.Process.Pid
	if _, err := s.Attach(pid); err != nil {
		t.Fatal(err)
	}
	d2d, _ := cudaapi.ByName("cuMemcpyDtoDAsync_v2")
	var mu sync.Mutex
	copies, paused := 0, false
	// The sink must see the events of one thread and the markers in End
	// order across batches: a marker reaches it with the events about it.
	var lastEnd uint64
	outOfOrder := 0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- s.Run(ctx, func(batch []events.Event, _ []LibraryPlan) {
			mu.Lock()
			defer mu.Unlock()
			for _, ev := range batch {
				if ev.End < lastEnd {
					outOfOrder++
				}
				lastEnd = max(lastEnd, ev.End)
				switch {
				case ev.Kind == events.KindCall && ev.API == d2d.ID:
					copies++
				case ev.Kind == events.KindLaunchProbes && ev.Out == 0:
					paused = true
				}
			}
		})
	}()
	// count waits for the sink to have seen want copies, and a little
	// longer for any more.
	count := func(want int) int {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			n := copies
			mu.Unlock()
			if n >= want {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		return copies
	}
	h.mustCall(t, 100)
	if n := count(100); n != 100 {
		t.Fatalf("%d copies reported with launches counted in full, want 100", n)
	}
	// Launch counting pauses while the process is copying, so that the
	// marker falls among its copies.
	burst := make(chan struct{})
	go func() {
		defer close(burst)
		h.calls(300000)
	}()
	time.Sleep(50 * time.Millisecond)
	s.sampling.SampleLaunches(pid, time.Hour, time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		p := paused
		mu.Unlock()
		if p {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("launch counting never paused")
		}
		time.Sleep(20 * time.Millisecond)
	}
	<-burst
	s.closer.wait()
	before := count(0)
	h.mustCall(t, 100)
	if n := count(before + 100); n != before {
		t.Errorf("%d copies reported with launch counting paused, want none", n-before)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if outOfOrder > 0 {
		t.Errorf("%d events reached the sink before an event that ended earlier", outOfOrder)
	}
}

// TestLaunchSamplerFit: an on phase grows to hold whole steps (2.5 of
// them), its period with it so that the duty stays; it never shrinks, and
// a process not sampled, or sampled for its CPU-only waits, is left alone.
func TestLaunchSamplerFit(t *testing.T) {
	sp := launchSampler{enabled: true, period: 40 * time.Second, on: time.Second}
	if sp.fit(300 * time.Millisecond) {
		t.Errorf("0.3 s steps: a 1 s phase holds them, but it grew to %v", sp.on)
	}
	if !sp.fit(1500*time.Millisecond) || sp.on != 3750*time.Millisecond || sp.period != 150*time.Second {
		t.Errorf("1.5 s steps: on %v, period %v; want 3.75 s in 150 s", sp.on, sp.period)
	}
	if sp.fit(time.Second) || sp.on != 3750*time.Millisecond {
		t.Errorf("1 s steps after 1.5 s ones: on %v; phases only grow", sp.on)
	}
	if !sp.fit(time.Hour) || sp.on != maxLaunchOn || sp.period != 40*maxLaunchOn {
		t.Errorf("1 h steps: on %v, period %v; want %v in %v", sp.on, sp.period, maxLaunchOn, 40*maxLaunchOn)
	}
	for _, sp := range []launchSampler{{period: 40 * time.Second, on: time.Second}, {enabled: true, cpuOnly: true, period: 40 * time.Second, on: time.Second}} {
		if sp.fit(10 * time.Second) {
			t.Errorf("%+v: fitted", sp)
		}
	}
}

// TestWarnUnlessExited: a failure to attach to a live process is a
// warning; to one that has exited (an on phase due as the job ends), a
// debug line saying so.
func TestWarnUnlessExited(t *testing.T) {
	var logged bytes.Buffer
	s := &core{cfg: Config{Log: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))}}
	target := func(args ...string) (*target, *exec.Cmd) {
		cmd := exec.Command(args[0], args[1:]...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		return &target{pid: cmd.Process.Pid, pidfd: fd}, cmd
	}
	// What a process's exit leaves: its files are gone from /proc/PID/root.
	gone := fmt.Errorf("open /lib/libcuda.so.1: %w", fs.ErrNotExist)
	live, cmd := target("sleep", "30")
	defer cmd.Process.Kill()
	s.warnUnlessExited(live, "reattach launch probes", gone, "pid", live.pid)
	if out := logged.String(); !strings.Contains(out, "level=WARN") || strings.Contains(out, "exited") {
		t.Errorf("live process: %q, want a warning", out)
	}
	logged.Reset()
	exited, cmd := target("true")
	cmd.Wait()
	s.warnUnlessExited(exited, "reattach launch probes", gone, "pid", exited.pid)
	if out := logged.String(); !strings.Contains(out, "level=DEBUG") || !strings.Contains(out, "the process has exited") {
		t.Errorf("exited process: %q, want a debug line saying so", out)
	}
}

// TestLearningSampler: while a process's steps are learned its launches
// go off at once (the on phase was its first launches, measured), come
// back after period-on with the phases doubled, the duty kept; the steady
// cycle, told while learning, takes over from the phase in progress;
// told every launch is to be counted, a sampler whose launches are off
// switches them on for good.
func TestLearningSampler(t *testing.T) {
	m := &Sampling{core: &core{cfg: Config{Options: Options{Launches: true}, Log: slog.New(slog.DiscardHandler)}, targets: map[int]*target{}}}
	tg := &target{pid: 1}
	m.targets[1] = tg
	switches := func(at time.Time) string {
		var out []string
		for _, e := range m.switchDue(at) {
			out = append(out, map[uint64]string{0: "off", 1: "on"}[e.Out])
		}
		return strings.Join(out, ",")
	}
	m.LearnLaunches(1, 10*time.Second, time.Second)
	start := tg.sampler.since.Add(time.Second)
	if got := switches(start); got != "off" {
		t.Fatalf("learning: %q at once, want off", got)
	}
	if got := switches(start.Add(8900 * time.Millisecond)); got != "" {
		t.Errorf("0.1 s before the off phase ends: %q", got)
	}
	if got := switches(start.Add(9 * time.Second)); got != "on" || tg.sampler.on != 2*time.Second || tg.sampler.period != 20*time.Second {
		t.Errorf("off phase over: %q, then %v in %v; want on, 2 s in 20 s", got, tg.sampler.on, tg.sampler.period)
	}
	m.LearnLaunches(1, time.Minute, time.Second) // learning already: nothing changes
	if tg.sampler.period != 20*time.Second {
		t.Errorf("told to learn again: period %v", tg.sampler.period)
	}
	m.SampleLaunches(1, 40*time.Second, time.Second)
	if got := switches(start.Add(10 * time.Second)); got != "off" || tg.sampler.learning || tg.sampler.period != 40*time.Second {
		t.Errorf("steady cycle told: %q after 1 s, learning %v, period %v; want off, the steady 40 s", got, tg.sampler.learning, tg.sampler.period)
	}
	if got := switches(start.Add(48900 * time.Millisecond)); got != "" {
		t.Errorf("steady off phase: %q before its 39 s were over", got)
	}

	delete(m.targets, 1)
	other := &target{pid: 2}
	m.targets[2] = other
	m.LearnLaunches(2, 10*time.Second, time.Second)
	now := other.sampler.since.Add(time.Second)
	switches(now)
	if !other.sampler.off {
		t.Fatal("learning: launches not off")
	}
	m.SampleLaunches(2, 0, 0)
	if got := switches(now.Add(time.Millisecond)); got != "on" || other.sampler.enabled {
		t.Errorf("every launch to be counted: %q, sampler %+v; want on for good", got, other.sampler)
	}
	if got := switches(now.Add(time.Hour)); got != "" {
		t.Errorf("counted for good, then %q", got)
	}
}
