package probes

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
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
	s.SampleLaunches(pid, time.Hour, time.Millisecond)
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
