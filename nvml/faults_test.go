package nvml

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/nvml/nvmlfake"
)

// TestUnsupportedFields: a field a GPU cannot give is absent, asked once,
// and warned about once, with every GPU concerned on that one line.
func TestUnsupportedFields(t *testing.T) {
	h := nvmlfake.NewHost()
	for i, d := range h.Devs {
		d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_FUNCTION_NOT_FOUND }
		if i < 4 {
			d.GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) {
				return 0, nvml.ERROR_NO_PERMISSION
			}
		}
	}
	// NVLink is not supported (a PCIe card), the other GPM metrics are.
	h.Srv.GpmMetricsGetFunc = func(m *nvml.GpmMetricsGetType) nvml.Return {
		ret := h.GpmMetricsGet(m)
		for k := range m.NumMetrics {
			switch nvml.GpmMetricId(m.Metrics[k].MetricId) {
			case nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC:
				m.Metrics[k].Value, m.Metrics[k].NvmlReturn = 0, uint32(nvml.ERROR_NOT_SUPPORTED)
			}
		}
		return ret
	}
	s, logs := newSampler(t, h, Config{})
	for round := 1; round <= 5; round++ {
		smps := s.Sample()
		if len(smps) != 8 {
			t.Fatalf("round %d: %d samples", round, len(smps))
		}
		for i, smp := range smps {
			if events.Has(smp.PowerW) || smp.ThrottleKnown || events.Has(smp.NVLinkRxBps) || events.Has(smp.NVLinkTxBps) {
				t.Errorf("round %d GPU %d: unsupported fields present: %+v", round, i, smp)
			}
			if smp.PowerLimitW != 700 || (round > 1 && !closeTo(smp.SMActive, float64(40+i)/100)) {
				t.Errorf("round %d GPU %d: supported fields lost: %+v", round, i, smp)
			}
			if i < 4 == (events.Has(smp.ECCCorrected) || events.Has(smp.ECCUncorrected)) {
				t.Errorf("round %d GPU %d: ECC %v/%v", round, i, smp.ECCCorrected, smp.ECCUncorrected)
			}
		}
	}
	for i, d := range h.Devs {
		if n := len(d.GetPowerUsageCalls()); n != 1 {
			t.Errorf("GPU %d: GetPowerUsage asked %d times, want once", i, n)
		}
		if n, want := len(d.GetTotalEccErrorsCalls()), map[bool]int{true: 2, false: 10}[i < 4]; n != want {
			t.Errorf("GPU %d: GetTotalEccErrors asked %d times, want %d", i, n, want)
		}
	}
	all := "gpus=0,1,2,3,4,5,6,7"
	for _, w := range [][]string{
		{"power draw not available", "call=GetPowerUsage", all, "ERROR_NOT_SUPPORTED"},
		{"throttle reasons not available", "call=GetCurrentClocksEventReasons", all, "ERROR_FUNCTION_NOT_FOUND"},
		{"msg=\"NVML: corrected ECC", "call=GetTotalEccErrors(CORRECTED)", "gpus=0,1,2,3 ", "ERROR_NO_PERMISSION"},
		{"msg=\"NVML: uncorrected ECC", "call=GetTotalEccErrors(UNCORRECTED)", "gpus=0,1,2,3 "},
		{"NVLink rx not available", "call=GpmMetricsGet(NVLINK_TOTAL_RX_PER_SEC)", all},
		{"NVLink tx not available", "call=GpmMetricsGet(NVLINK_TOTAL_TX_PER_SEC)", all},
	} {
		if got := logs.lines("WARN", w...); len(got) != 1 {
			t.Errorf("warnings holding %q: %d, want 1", w, len(got))
		}
	}
	if n := s.Errors(); n != 0 {
		t.Errorf("Errors() = %d: unsupported fields counted as errors", n)
	}
	if n := len(logs.lines("WARN")); n != 6 {
		t.Errorf("%d warnings, want one per field (6):\n%s", n, logs)
	}
}

// TestNoGPM: a GPU without GPM gives the rest, and no GPM values.
func TestNoGPM(t *testing.T) {
	h := nvmlfake.NewHost()
	h.Devs[0].GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) { return nvml.GpmSupport{}, nvml.SUCCESS }
	s, logs := newSampler(t, h, Config{})
	s.Sample()
	smps := s.Sample()
	if events.Has(smps[0].SMActive) || !events.Has(smps[0].GPUUtil) || !closeTo(smps[1].SMActive, 0.41) {
		t.Errorf("GPU 0 (no GPM) %+v, GPU 1 %+v", smps[0], smps[1])
	}
	if w := logs.lines("WARN", "GPM metrics", "gpus=0 "); len(w) != 1 || len(h.GpmAllocs) != 14 {
		t.Errorf("warnings %q, %d GPM samples allocated (want 14)", w, len(h.GpmAllocs))
	}
}

// TestOldDriverThrottle: before R535 the reasons come from the older call.
func TestOldDriverThrottle(t *testing.T) {
	h := nvmlfake.NewHost()
	h.Srv.LookupSymbolFunc = func(sym string) error {
		if sym == symClocksEventReasons {
			return errors.New("undefined symbol")
		}
		return nil
	}
	s, _ := newSampler(t, h, Config{})
	if smp := s.Sample()[0]; !smp.ThrottleKnown || smp.Throttle != nvmlfake.OldReasons {
		t.Errorf("throttle %#x known %v, want %#x", smp.Throttle, smp.ThrottleKnown, nvmlfake.OldReasons)
	}
	if n := len(h.Devs[0].GetCurrentClocksEventReasonsCalls()); n != 0 {
		t.Errorf("the R535 call made %d times on a driver without it", n)
	}
}

// TestGPULost: a GPU that falls off the bus is dropped, with one warning.
func TestGPULost(t *testing.T) {
	h := nvmlfake.NewHost()
	s, logs := newSampler(t, h, Config{})
	if n := len(s.Sample()); n != 8 {
		t.Fatalf("%d samples before the loss", n)
	}
	h.Devs[3].GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST }
	for round := 2; round <= 4; round++ {
		smps := s.Sample()
		if len(smps) != 7 {
			t.Fatalf("round %d: %d samples, want 7", round, len(smps))
		}
		for _, smp := range smps {
			if smp.GPU == 3 || !events.Has(smp.PowerW) {
				t.Errorf("round %d: %+v", round, smp)
			}
		}
	}
	if n := s.Errors(); n != 1 {
		t.Errorf("Errors() = %d after one GPU lost, want 1", n)
	}
	if n := len(h.Devs[3].GetUtilizationRatesCalls()); n != 2 {
		t.Errorf("lost GPU asked %d times, want 2 (before and at the loss)", n)
	}
	if n := len(h.Devs[3].GetMemoryInfo_v2Calls()); n != 1 {
		t.Errorf("lost GPU's other calls made after the loss: GetMemoryInfo_v2 %d times", n)
	}
	if w := logs.lines("WARN"); len(w) != 1 || !strings.Contains(w[0], "GPU lost") || !strings.Contains(w[0], "gpu=3 ") {
		t.Errorf("warnings: %q, want one about GPU 3", w)
	}
}

func TestLibraryMissing(t *testing.T) {
	for ret, want := range map[nvml.Return]string{
		nvml.ERROR_LIBRARY_NOT_FOUND: "NVML not available (libnvidia-ml.so.1 not found): GPU hardware state is left out; " +
			"install the NVIDIA driver, or put its libnvidia-ml.so.1 on the loader path",
		nvml.ERROR_DRIVER_NOT_LOADED: "NVML not available (NVIDIA driver not loaded): GPU hardware state is left out; " +
			"load the driver (nvidia-smi should then list the GPUs)",
	} {
		h := nvmlfake.NewHost()
		h.Srv.InitFunc = func() nvml.Return { return ret }
		s, err := New(h.Srv, Config{})
		if s != nil || err == nil || err.Error() != want || !errors.Is(err, ErrUnavailable) {
			t.Errorf("Init %v: New = %v, %v; want %q", ret, s, err, want)
		}
		if n := len(h.Devs[0].GetUUIDCalls()); n != 0 {
			t.Errorf("GPUs asked after a failed Init")
		}
	}
}

// TestHungCall: a call that never returns costs one timeout and one warning;
// NVML is left alone (no calls, no goroutines) until it returns, and then
// sampling resumes.
func TestHungCall(t *testing.T) {
	const timeout = 50 * time.Millisecond
	h := nvmlfake.NewHost()
	s, logs := newSampler(t, h, Config{CallTimeout: timeout})
	s.Sample()
	release := make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	h.Devs[2].GetPowerUsageFunc = func() (uint32, nvml.Return) { <-release; return 123_000, nvml.SUCCESS }

	start := time.Now()
	smps := s.Sample()
	if d := time.Since(start); d < timeout || d > timeout+200*time.Millisecond {
		t.Errorf("round with a hung call took %v, want about %v", d, timeout)
	}
	// GPUs 0 and 1 whole, GPU 2 up to the hung call, nothing after it.
	if len(smps) != 3 || !events.Has(smps[1].ECCCorrected) || !events.Has(smps[2].MemUsed) || events.Has(smps[2].PowerW) || events.Has(smps[2].TempC) {
		t.Fatalf("round with a hung call: %+v", smps)
	}
	goroutines := runtime.NumGoroutine()
	utilCalls := len(h.Devs[0].GetUtilizationRatesCalls())
	start = time.Now()
	for range 20 {
		if smps := s.Sample(); smps != nil {
			t.Fatalf("sampled while a call is stuck: %+v", smps)
		}
	}
	if d := time.Since(start); d > timeout {
		t.Errorf("20 rounds while stuck took %v: they waited on NVML", d)
	}
	if _, err := s.ComputeProcesses(); err == nil {
		t.Errorf("ComputeProcesses while stuck: no error")
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		t.Errorf("goroutines %d -> %d while stuck", goroutines, n)
	}
	if n := len(h.Devs[0].GetUtilizationRatesCalls()); n != utilCalls {
		t.Errorf("NVML called %d times while stuck", n-utilCalls)
	}
	w := logs.lines("WARN")
	if n := s.Errors(); n != 1 {
		t.Errorf("Errors() = %d after one hung call (and rounds not made while stuck), want 1", n)
	}
	if len(w) != 1 || !strings.Contains(w[0], "call=GetPowerUsage gpu=2 ") {
		t.Errorf("warnings: %q, want one naming GetPowerUsage on GPU 2", w)
	}

	close(release)
	deadline := time.Now().Add(2 * time.Second)
	for s.calls.stuck() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	smps = s.Sample()
	if len(smps) != 8 || smps[2].PowerW != 123 {
		t.Errorf("after the call returned: %d samples, GPU 2 power %v", len(smps), smps[2].PowerW)
	}
	if n := len(logs.lines("WARN")); n != 1 || len(logs.lines("INFO", "resumes", "call=GetPowerUsage")) != 1 {
		t.Errorf("after resuming, %d warnings and no resume line:\n%s", n, logs)
	}
}

// TestOldDriverMemory: before R510 memory comes from GetMemoryInfo, whose
// "used" holds the driver's reservation too.
func TestOldDriverMemory(t *testing.T) {
	h := nvmlfake.NewHost()
	h.Srv.LookupSymbolFunc = func(sym string) error {
		if sym == symMemoryInfoV2 {
			return errors.New("undefined symbol")
		}
		return nil
	}
	s, _ := newSampler(t, h, Config{})
	if smp := s.Sample()[0]; smp.MemUsed != float64(nvmlfake.GiB(nvmlfake.MemUsedGiB)+nvmlfake.Reserved) {
		t.Errorf("memory used %v, want v1's %v", smp.MemUsed, nvmlfake.GiB(nvmlfake.MemUsedGiB)+nvmlfake.Reserved)
	}
	if n := len(h.Devs[0].GetMemoryInfo_v2Calls()); n != 0 {
		t.Errorf("GetMemoryInfo_v2 called %d times on a driver without it", n)
	}
}
