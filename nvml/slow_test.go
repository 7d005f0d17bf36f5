package nvml

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuprof/gpuprof/events"
)

// TestPCIeWithoutGPM: where GPM is missing, PCIe comes from
// GetPcieThroughput, in KB/s (1024 bytes), from the first round.
func TestPCIeWithoutGPM(t *testing.T) {
	h := newFakeHost(t)
	h.devs[4].GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) { return nvml.GpmSupport{}, nvml.SUCCESS }
	s, _ := newSampler(t, h, Config{})
	for round := 1; round <= 2; round++ {
		smps := s.Sample()
		if smp := smps[4]; smp.PCIeTxBps != (fakePCIeTxKB+4)*1024 || smp.PCIeRxBps != (fakePCIeRxKB+4)*1024 {
			t.Errorf("round %d GPU 4 (no GPM) PCIe tx %v rx %v B/s, want %v and %v", round,
				smp.PCIeTxBps, smp.PCIeRxBps, (fakePCIeTxKB+4)*1024, (fakePCIeRxKB+4)*1024)
		}
		if smp := smps[3]; round == 2 && smp.PCIeTxBps != fakeGPMPCIeTxMiB<<20 {
			t.Errorf("GPU 3 (GPM) PCIe tx %v", smp.PCIeTxBps)
		}
	}
}

// TestSlowFields: the costly calls are made in the first two rounds, then
// at most once a second (PCIe) or every five (per-process utilization); the
// others every round. A slow field is absent in the rounds between.
func TestSlowFields(t *testing.T) {
	h := newFakeHost(t)
	h.devs[4].GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) { return nvml.GpmSupport{}, nvml.SUCCESS }
	h.devs[4].GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { // shared: utilization asked
		return []nvml.ProcessInfo{{Pid: 5004, UsedGpuMemory: gib(1)}, {Pid: 6004, UsedGpuMemory: gib(1)}}, nvml.SUCCESS
	}
	clock := newFakeClock()
	clock.step.Store(int64(time.Millisecond))
	s, _ := newSampler(t, h, Config{Now: clock.Now})
	rounds := 0
	for ; rounds < 10; rounds++ {
		smps := s.Sample()
		smp, asked := smps[4], rounds < 2
		if asked != events.Has(smp.PCIeTxBps) || asked != events.Has(smp.Procs[0].SMUtil) ||
			!events.Has(smp.PowerW) || !events.Has(smp.ECCCorrected) || !events.Has(smp.Procs[0].MemUsed) {
			t.Errorf("round %d (within a second of the second): %+v", rounds, smp)
		}
	}
	clock.now.Add(int64(time.Second))
	if smp := s.Sample()[4]; !events.Has(smp.PCIeRxBps) || events.Has(smp.Procs[0].SMUtil) {
		t.Errorf("a second on: %+v, want PCIe and no per-process utilization", smp)
	}
	clock.now.Add(int64(4 * time.Second))
	if smp := s.Sample()[4]; smp.Procs[0].SMUtil != 40 {
		t.Errorf("five seconds on: %+v, want per-process utilization", smp)
	}
	d := h.devs[4]
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
	h := newFakeHost(t)
	h.devs[1].GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
	s, _ := newSampler(t, h, Config{})
	s.Sample()
	smps := s.Sample()
	if len(smps[1].Procs) != 0 || len(h.devs[1].GetProcessUtilizationCalls()) != 0 || len(h.devs[0].GetProcessUtilizationCalls()) != 2 {
		t.Errorf("GPU 1 without processes: %+v, %d GetProcessUtilization calls", smps[1].Procs, len(h.devs[1].GetProcessUtilizationCalls()))
	}
	if p := smps[3].Procs; len(p) != 1 || events.Has(p[0].SMUtil) || len(h.devs[3].GetProcessUtilizationCalls()) != 0 {
		t.Errorf("GPU 3, one process: %+v, %d GetProcessUtilization calls", p, len(h.devs[3].GetProcessUtilizationCalls()))
	}
}
