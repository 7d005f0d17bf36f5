package nvml

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/nvml/nvmlfake"
)

// TestPCIeWithoutGPM: where GPM is missing, PCIe comes from
// GetPcieThroughput, in KB/s (1024 bytes), from the first round.
func TestPCIeWithoutGPM(t *testing.T) {
	h := nvmlfake.NewHost()
	h.Devs[4].GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) { return nvml.GpmSupport{}, nvml.SUCCESS }
	s, _ := newSampler(t, h, Config{})
	for round := 1; round <= 2; round++ {
		smps := s.Sample()
		if smp := smps[4]; smp.PCIeTxBps != (nvmlfake.PCIeTxKB+4)*1024 || smp.PCIeRxBps != (nvmlfake.PCIeRxKB+4)*1024 {
			t.Errorf("round %d GPU 4 (no GPM) PCIe tx %v rx %v B/s, want %v and %v", round,
				smp.PCIeTxBps, smp.PCIeRxBps, (nvmlfake.PCIeTxKB+4)*1024, (nvmlfake.PCIeRxKB+4)*1024)
		}
		if smp := smps[3]; round == 2 && smp.PCIeTxBps != nvmlfake.GPMPCIeTxMiB<<20 {
			t.Errorf("GPU 3 (GPM) PCIe tx %v", smp.PCIeTxBps)
		}
	}
}

// TestSlowFields: the costly calls and the slow-moving fields are read in
// the first two rounds, then at most once a second (PCIe, temperature, the
// process list), every five (per-process utilization) or every ten (ECC,
// power limit); what a step is joined with every round. A field not read
// in a round is absent from it.
func TestSlowFields(t *testing.T) {
	h := nvmlfake.NewHost()
	h.Devs[4].GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) { return nvml.GpmSupport{}, nvml.SUCCESS }
	h.Devs[4].GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { // shared: utilization asked
		return []nvml.ProcessInfo{{Pid: 5004, UsedGpuMemory: nvmlfake.GiB(1)}, {Pid: 6004, UsedGpuMemory: nvmlfake.GiB(1)}}, nvml.SUCCESS
	}
	clock := newFakeClock()
	clock.step.Store(int64(time.Millisecond))
	s, _ := newSampler(t, h, Config{Now: clock.Now})
	rounds := 0
	for ; rounds < 10; rounds++ {
		smps := s.Sample()
		smp, asked := smps[4], rounds < 2
		listed := len(smp.Procs) == 2 && events.Has(smp.Procs[0].MemUsed) && events.Has(smp.Procs[0].SMUtil)
		if asked != events.Has(smp.PCIeTxBps) || asked != listed || asked != events.Has(smp.ECCCorrected) ||
			asked != events.Has(smp.TempC) || asked != events.Has(smp.MemUsed) || !events.Has(smp.PowerW) ||
			!events.Has(smp.SMClockMHz) || !events.Has(smp.GPUUtil) {
			t.Errorf("round %d (within a second of the second): %+v", rounds, smp)
		}
	}
	clock.now.Add(int64(time.Second))
	if smp := s.Sample()[4]; !events.Has(smp.PCIeRxBps) || len(smp.Procs) != 2 || events.Has(smp.Procs[0].SMUtil) ||
		!events.Has(smp.TempC) || events.Has(smp.ECCCorrected) {
		t.Errorf("a second on: %+v, want PCIe, temperature and the processes, no per-process utilization or ECC", smp)
	}
	clock.now.Add(int64(4 * time.Second))
	if smp := s.Sample()[4]; smp.Procs[0].SMUtil != 40 {
		t.Errorf("five seconds on: %+v, want per-process utilization", smp)
	}
	d := h.Devs[4]
	for name, n := range map[string][2]int{
		"GetPcieThroughput":     {len(d.GetPcieThroughputCalls()) / 2, 4}, // tx and rx
		"GetProcessUtilization": {len(d.GetProcessUtilizationCalls()), 3},
		"GetPowerUsage":         {len(d.GetPowerUsageCalls()), rounds + 2},
	} {
		if n[0] != n[1] {
			t.Errorf("%s: %d calls in %d rounds, want %d", name, n[0], rounds+1, n[1])
		}
	}
}

// TestNoProcesses: with no compute process, or one that has the GPU to
// itself, per-process utilization, the costliest call, is not asked for.
func TestNoProcesses(t *testing.T) {
	h := nvmlfake.NewHost()
	h.Devs[1].GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
	s, _ := newSampler(t, h, Config{})
	s.Sample()
	smps := s.Sample()
	if len(smps[1].Procs) != 0 || len(h.Devs[1].GetProcessUtilizationCalls()) != 0 || len(h.Devs[0].GetProcessUtilizationCalls()) != 2 {
		t.Errorf("GPU 1 without processes: %+v, %d GetProcessUtilization calls", smps[1].Procs, len(h.Devs[1].GetProcessUtilizationCalls()))
	}
	if p := smps[3].Procs; len(p) != 1 || events.Has(p[0].SMUtil) || len(h.Devs[3].GetProcessUtilizationCalls()) != 0 {
		t.Errorf("GPU 3, one process: %+v, %d GetProcessUtilization calls", p, len(h.Devs[3].GetProcessUtilizationCalls()))
	}
}

// TestThrottleAtTopClock: a GPU at its top SM clock is slowed by nothing,
// and is not asked why.
func TestThrottleAtTopClock(t *testing.T) {
	h := nvmlfake.NewHost()
	h.Devs[2].GetClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) { return nvmlfake.MaxSMClock, nvml.SUCCESS }
	s, _ := newSampler(t, h, Config{})
	smps := s.Sample()
	if smp := smps[2]; !smp.ThrottleKnown || smp.Throttle != 0 || len(h.Devs[2].GetCurrentClocksEventReasonsCalls()) != 0 {
		t.Errorf("GPU 2 at its top clock: throttle %#x known %v, %d reason calls", smp.Throttle, smp.ThrottleKnown,
			len(h.Devs[2].GetCurrentClocksEventReasonsCalls()))
	}
	if smp := smps[1]; smp.Throttle != nvmlfake.Reasons {
		t.Errorf("GPU 1 below its top clock: throttle %#x, want %#x", smp.Throttle, nvmlfake.Reasons)
	}
}

// TestGPMEvery: rounds 50 ms apart take GPM every 200 ms; the rounds
// between carry the last period's metrics rather than none.
func TestGPMEvery(t *testing.T) {
	h := nvmlfake.NewHost()
	clock := newFakeClock()
	clock.step.Store(0) // time moves only between rounds
	s, _ := newSampler(t, h, Config{Now: clock.Now, GPMEvery: 200 * time.Millisecond})
	var sm []bool
	for range 12 {
		clock.now.Add(int64(50 * time.Millisecond))
		sm = append(sm, events.Has(s.Sample()[0].SMActive))
	}
	// GPM samples at rounds 0, 4, 8 (200 ms apart): metrics from round 4 on.
	for i, has := range sm {
		if has != (i >= 4) {
			t.Errorf("round %d: SM activity present %v; rounds %v", i, has, sm)
		}
	}
	if n := len(h.Devs[0].GpmSampleGetCalls()); n != 3 {
		t.Errorf("%d GPM samples in 12 rounds 50 ms apart, want 3", n)
	}
	if h.GpmBad.Load() != 0 {
		t.Errorf("%d GPM metric reads over samples not from consecutive periods", h.GpmBad.Load())
	}
}

// TestGPMTurnedOff: a negative GPMEvery (--nvml-gpm-interval 0) takes no GPM
// sample at all, and the round's other fields are still read.
func TestGPMTurnedOff(t *testing.T) {
	h := nvmlfake.NewHost()
	clock := newFakeClock()
	clock.step.Store(0)
	s, _ := newSampler(t, h, Config{Now: clock.Now, GPMEvery: -1})
	for range 8 {
		clock.now.Add(int64(100 * time.Millisecond))
		smp := s.Sample()[0]
		if events.Has(smp.SMActive) {
			t.Fatalf("SM activity %v with GPM off", smp.SMActive)
		}
		if !events.Has(smp.GPUUtil) {
			t.Fatalf("no utilization with GPM off: %+v", smp)
		}
	}
	if n := len(h.Devs[0].GpmSampleGetCalls()); n != 0 {
		t.Errorf("%d GPM samples with GPM off, want none", n)
	}
}
