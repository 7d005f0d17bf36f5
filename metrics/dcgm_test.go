package metrics

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/events"
)

// TestDCGMNames: a round's fields under dcgm-exporter's names, units and
// labels; a field a GPU did not give is absent (not NaN, not 0); a slow
// field keeps its reading through the rounds that skip it, until stale.
func TestDCGMNames(t *testing.T) {
	now := time.Unix(1000, 0)
	e, err := New(Config{Version: "test", DCGM: true, GPUs: testGPUs, Hostname: "host-a", GPUStaleAfter: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.dcgm.now = func() time.Time { return now }
	round := fullRound()
	// GPU 1: no power reading, no GPM (a PCIe card), throttle unknown.
	g1 := &round[1]
	g1.PowerW, g1.SMActive, g1.SMOccupancy, g1.TensorActive, g1.DRAMActive = math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()
	g1.NVLinkTxBps, g1.NVLinkRxBps, g1.ThrottleKnown = math.NaN(), math.NaN(), false
	e.GPUs(round)

	fams := gather(t, e)
	gpu0 := map[string]string{"gpu": "0", "UUID": testGPUs[0].UUID, "device": "nvidia0", "modelName": "NVIDIA H200", "Hostname": "host-a"}
	gpu1 := map[string]string{"gpu": "1", "UUID": testGPUs[1].UUID}
	for name, want := range map[string]float64{
		"DCGM_FI_DEV_GPU_UTIL": 88, "DCGM_FI_DEV_MEM_COPY_UTIL": 40, "DCGM_FI_DEV_FB_USED": 10 << 10, "DCGM_FI_DEV_FB_TOTAL": 140 << 10,
		"DCGM_FI_DEV_POWER_USAGE": 612, "DCGM_FI_DEV_POWER_MGMT_LIMIT": 700, "DCGM_FI_DEV_GPU_TEMP": 61,
		"DCGM_FI_DEV_SM_CLOCK": 1980, "DCGM_FI_DEV_MEM_CLOCK": 3201, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": 4,
		"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": 0, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 0,
		"DCGM_FI_PROF_SM_ACTIVE": 0.68, "DCGM_FI_PROF_SM_OCCUPANCY": 0.4, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.3,
		"DCGM_FI_PROF_DRAM_ACTIVE": 0.5, "DCGM_FI_PROF_PCIE_TX_BYTES": 1e9, "DCGM_FI_PROF_PCIE_RX_BYTES": 2e9,
		"DCGM_FI_PROF_NVLINK_TX_BYTES": 3e9, "DCGM_FI_PROF_NVLINK_RX_BYTES": 4e9,
	} {
		if got := value(fams, name, gpu0); !near(got, want) {
			t.Errorf("%s GPU 0 = %v, want %v", name, got, want)
		}
	}
	for _, name := range []string{"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_NVLINK_TX_BYTES", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"} {
		if m := series(fams, name, gpu1); m != nil {
			t.Errorf("%s for GPU 1, which did not give it: %v", name, m)
		}
	}
	if got := value(fams, "DCGM_FI_DEV_GPU_TEMP", gpu1); got != 61 {
		t.Errorf("GPU 1's temperature %v", got)
	}
	if text := scrape(t, e); strings.Contains(text, "NaN") {
		t.Errorf("NaN served:\n%s", text)
	}
	if m := series(fams, "DCGM_FI_DEV_XID_ERRORS", nil); m != nil {
		t.Errorf("an Xid value with no Xid reported: %v", m)
	}

	// A round later, the slow fields are not read (NaN): they keep their
	// reading; the power of GPU 0 moves.
	now = now.Add(time.Second)
	next := fullRound()
	for i := range next {
		next[i].MemUsed, next[i].TempC, next[i].PowerLimitW, next[i].ECCCorrected = math.NaN(), math.NaN(), math.NaN(), math.NaN()
	}
	next[0].PowerW = 650
	e.GPUs(next)
	e.Xid(events.Xid{GPU: 1, Code: 79})
	fams = gather(t, e)
	if got := value(fams, "DCGM_FI_DEV_FB_USED", gpu0); got != 10<<10 {
		t.Errorf("FB_USED between its readings: %v, want the last reading", got)
	}
	if got := value(fams, "DCGM_FI_DEV_POWER_USAGE", gpu0); got != 650 {
		t.Errorf("power %v, want the new reading 650", got)
	}
	if got := value(fams, "DCGM_FI_DEV_XID_ERRORS", gpu1); got != 79 {
		t.Errorf("Xid on GPU 1: %v, want 79", got)
	}

	// Over 30 s on, with only utilization read, the other fields are stale.
	now = now.Add(31 * time.Second)
	only := events.NewGPUSample(0, 2e9)
	only.GPUUtil = 12
	e.GPUs([]events.GPUSample{only})
	fams = gather(t, e)
	if got := value(fams, "DCGM_FI_DEV_GPU_UTIL", gpu0); got != 12 {
		t.Errorf("utilization %v, want 12", got)
	}
	for _, name := range []string{"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE"} {
		if m := series(fams, name, gpu0); m != nil {
			t.Errorf("%s served over 30 s after its last reading: %v", name, m)
		}
	}
	if got := value(fams, "DCGM_FI_DEV_XID_ERRORS", gpu1); got != 79 {
		t.Errorf("the last Xid is not a reading that goes stale: %v", got)
	}
}

// TestDCGMOff: --metrics-dcgm=false serves no DCGM series however many
// rounds come, and gpuprof's own as before.
func TestDCGMOff(t *testing.T) {
	e, err := New(Config{Version: "test", GPUs: testGPUs})
	if err != nil {
		t.Fatal(err)
	}
	e.GPUs(fullRound())
	e.Xid(events.Xid{GPU: 0, Code: 13})
	e.Step(fullStep(1, 0))
	text := scrape(t, e)
	if strings.Contains(text, "DCGM_") {
		t.Errorf("DCGM series with DCGM off:\n%s", text)
	}
	if !strings.Contains(text, "gpuprof_step_seconds_count") {
		t.Errorf("gpuprof's own series missing with DCGM off:\n%s", text)
	}
}
