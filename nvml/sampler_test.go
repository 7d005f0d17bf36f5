package nvml

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/nvml/nvmlfake"
)

func TestGPUsIdentity(t *testing.T) {
	h := nvmlfake.NewHost()
	s, _ := newSampler(t, h, Config{})
	got := s.GPUs()
	if len(got) != 8 {
		t.Fatalf("GPUs: %d, want 8", len(got))
	}
	for i, g := range got {
		want := events.GPU{Index: i, UUID: h.Devs[i].UUID, Name: "NVIDIA H200 141GB HBM3e", BusID: h.Devs[i].PciBusID}
		if g != want {
			t.Errorf("GPU %d: %+v, want %+v", i, g, want)
		}
	}
}

// TestFullRound checks every field of every GPU, converted to its unit.
func TestFullRound(t *testing.T) {
	h := nvmlfake.NewHost()
	s, logs := newSampler(t, h, Config{})
	smps := s.Sample()
	if len(smps) != 8 {
		t.Fatalf("samples: %d, want 8", len(smps))
	}
	for i, smp := range smps {
		total := float64(h.Devs[i].MemoryInfo.Total)
		want := []struct {
			name      string
			got, want float64
		}{
			{"GPUUtil", smp.GPUUtil, float64(50 + i)},
			{"MemUtil", smp.MemUtil, float64(20 + i)},
			{"MemUsed", smp.MemUsed, float64(nvmlfake.GiB(nvmlfake.MemUsedGiB + i))},
			{"MemTotal", smp.MemTotal, total},
			{"PowerW", smp.PowerW, 300 + float64(i)},
			{"PowerLimitW", smp.PowerLimitW, 700},
			{"TempC", smp.TempC, float64(40 + i)},
			{"SMClockMHz", smp.SMClockMHz, nvmlfake.SMClock},
			{"MemClockMHz", smp.MemClockMHz, nvmlfake.MemClock},
			{"ECCCorrected", smp.ECCCorrected, nvmlfake.ECCCorrected},
			{"ECCUncorrected", smp.ECCUncorrected, 0}, // a real zero, not absent
		}
		for _, w := range want {
			if !closeTo(w.got, w.want) {
				t.Errorf("GPU %d %s = %v, want %v", i, w.name, w.got, w.want)
			}
		}
		if smp.GPU != i || smp.TimeNS == 0 {
			t.Errorf("GPU %d: sample of GPU %d at %d", i, smp.GPU, smp.TimeNS)
		}
		if !smp.ThrottleKnown || smp.Throttle != nvmlfake.Reasons {
			t.Errorf("GPU %d throttle %#x known %v, want %#x", i, smp.Throttle, smp.ThrottleKnown, nvmlfake.Reasons)
		}
		// GPM (which gives PCIe on these GPUs) needs two samples: none in the first round.
		for _, v := range []float64{smp.SMActive, smp.SMOccupancy, smp.TensorActive, smp.DRAMActive, smp.NVLinkRxBps, smp.NVLinkTxBps, smp.PCIeTxBps, smp.PCIeRxBps} {
			if events.Has(v) {
				t.Errorf("GPU %d: GPM value %v in the first round", i, v)
			}
		}
	}
	if w := logs.lines("WARN"); len(w) != 0 {
		t.Errorf("warnings on a healthy host: %q", w)
	}
}

func closeTo(got, want float64) bool {
	return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want))
}

// TestGPMRounds checks GPM between rounds: fractions and bytes/s, from the
// previous round's sample to this one's, with two samples per GPU alternating.
func TestGPMRounds(t *testing.T) {
	h := nvmlfake.NewHost()
	s, _ := newSampler(t, h, Config{})
	s.Sample()
	for round := 2; round <= 4; round++ {
		smps := s.Sample()
		if len(smps) != 8 {
			t.Fatalf("round %d: %d samples", round, len(smps))
		}
		for i, smp := range smps {
			for _, w := range []struct {
				name      string
				got, want float64
			}{
				{"SMActive", smp.SMActive, float64(40+i) / 100},
				{"SMOccupancy", smp.SMOccupancy, 0.25},
				{"TensorActive", smp.TensorActive, 0.60},
				{"DRAMActive", smp.DRAMActive, 0.30},
				{"NVLinkRxBps", smp.NVLinkRxBps, nvmlfake.NVLinkRxMiB << 20},
				{"NVLinkTxBps", smp.NVLinkTxBps, nvmlfake.NVLinkTxMiB << 20},
				{"PCIeTxBps", smp.PCIeTxBps, nvmlfake.GPMPCIeTxMiB << 20},
				{"PCIeRxBps", smp.PCIeRxBps, nvmlfake.GPMPCIeRxMiB << 20},
			} {
				if !closeTo(w.got, w.want) {
					t.Errorf("round %d GPU %d %s = %v, want %v", round, i, w.name, w.got, w.want)
				}
			}
		}
	}
	if n := h.GpmBad.Load(); n != 0 {
		t.Errorf("%d GpmMetricsGet calls on samples not of consecutive rounds", n)
	}
	if n := len(h.Devs[0].GetPcieThroughputCalls()); n != 0 {
		t.Errorf("GetPcieThroughput (20ms in the driver) called %d times where GPM gives PCIe", n)
	}
	if len(h.GpmAllocs) != 16 {
		t.Errorf("GpmSampleAlloc called %d times, want 2 per GPU (16)", len(h.GpmAllocs))
	}
}

// TestProcesses checks per-process memory and utilization, the last-seen
// timestamp handed back to NVML, and "no new samples" as no failure.
func TestProcesses(t *testing.T) {
	h := nvmlfake.NewHost()
	h.Devs[0].GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 5000, UsedGpuMemory: nvmlfake.GiB(1)}, {Pid: nvmlfake.SharedPID, UsedGpuMemory: math.MaxUint64}}, nvml.SUCCESS
	}
	s, logs := newSampler(t, h, Config{})
	smps := s.Sample()
	procs := smps[0].Procs
	if len(procs) != 2 {
		t.Fatalf("GPU 0 processes: %+v, want 5000 and %d (not 9999, a graphics one)", procs, nvmlfake.SharedPID)
	}
	p, shared := procs[0], procs[1]
	if p.PID != 5000 || p.MemUsed != float64(nvmlfake.GiB(1)) || p.SMUtil != 40 || p.MemUtil != 15.5 {
		t.Errorf("process 5000: %+v, want 1 GiB, the samples' mean 40%% SM and 15.5%% memory", p)
	}
	if shared.PID != nvmlfake.SharedPID || events.Has(shared.MemUsed) || events.Has(shared.SMUtil) || events.Has(shared.MemUtil) {
		t.Errorf("process %d: %+v, want memory NaN (NVML_VALUE_NOT_AVAILABLE) and no utilization (no sample)", nvmlfake.SharedPID, shared)
	}
	if p := smps[3].Procs; len(p) != 1 || p[0].PID != 5003 || p[0].MemUsed != float64(nvmlfake.GiB(4)) {
		t.Errorf("GPU 3 processes: %+v", p)
	}

	h.Devs[0].GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		return nil, nvml.ERROR_NOT_FOUND
	}
	smps = s.Sample()
	if p := smps[0].Procs[0]; p.MemUsed != float64(nvmlfake.GiB(1)) || events.Has(p.SMUtil) {
		t.Errorf("no new utilization sample: %+v, want memory and no utilization", p)
	}
	s.Sample()
	seen := h.Devs[0].GetProcessUtilizationCalls()
	if len(seen) != 3 || seen[0].V != 0 || seen[1].V != 100 || seen[2].V != 100 {
		t.Errorf("lastSeenTimestamp handed to NVML: %+v, want 0, then the latest seen (100) twice", seen)
	}
	if w := logs.lines("WARN"); len(w) != 0 {
		t.Errorf("ERROR_NOT_FOUND (no new samples) warned: %q", w)
	}
}

func TestComputeProcesses(t *testing.T) {
	h := nvmlfake.NewHost()
	h.Devs[7].GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NO_PERMISSION }
	s, logs := newSampler(t, h, Config{})
	got, err := s.ComputeProcesses()
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint32][]int{nvmlfake.SharedPID: {0, 1}}
	for i := range 7 {
		want[uint32(5000+i)] = []int{i}
	}
	if len(got) != len(want) {
		t.Errorf("ComputeProcesses: %v, want %v", got, want)
	}
	for pid, idx := range want {
		if !slices.Equal(got[pid], idx) {
			t.Errorf("process %d on GPUs %v, want %v", pid, got[pid], idx)
		}
	}
	if w := logs.lines("WARN", "call=GetComputeRunningProcesses", "gpus=7"); len(w) != 1 {
		t.Errorf("warnings for GPU 7's processes: %q, want one", w)
	}

	for _, d := range h.Devs {
		d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	}
	s2, _ := newSampler(t, h, Config{})
	if m, err := s2.ComputeProcesses(); err == nil {
		t.Errorf("no GPU lists processes: %v, want an error", m)
	}
}

func TestConfigGPUs(t *testing.T) {
	h := nvmlfake.NewHost()
	s, _ := newSampler(t, h, Config{GPUs: []int{3, 1, 3}})
	if g := s.GPUs(); len(g) != 2 || g[0].Index != 3 || g[1].Index != 1 {
		t.Errorf("GPUs: %+v, want 3 and 1", g)
	}
	if smps := s.Sample(); len(smps) != 2 || smps[0].GPU != 3 || smps[1].GPU != 1 {
		t.Errorf("samples of GPUs other than asked: %+v", smps)
	}
	if _, err := New(h.Srv, Config{GPUs: []int{8}}); err == nil || err.Error() != "GPU 8 does not exist: NVML sees 8 GPUs" {
		t.Errorf("GPU 8 of 8: %v", err)
	}
}

func TestRunAndClose(t *testing.T) {
	h := nvmlfake.NewHost()
	s, _ := newSampler(t, h, Config{Interval: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	rounds := 0
	s.Run(ctx, func(smps []events.GPUSample) {
		if len(smps) != 8 {
			t.Errorf("round of %d samples", len(smps))
		}
		if rounds++; rounds == 3 {
			cancel()
		}
	})
	if rounds != 3 {
		t.Errorf("Run handed out %d rounds after cancel at the 3rd", rounds)
	}
	s.Close()
	s.Close()
	if n := len(h.Srv.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown called %d times, want 1", n)
	}
	for _, g := range h.GpmAllocs {
		if !g.Freed {
			t.Errorf("GPM sample of GPU %d not freed", g.Dev)
		}
	}
	if smps := s.Sample(); smps != nil {
		t.Errorf("Sample after Close: %d samples", len(smps))
	}
}
