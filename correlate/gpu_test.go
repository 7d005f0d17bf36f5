package correlate

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/events"
)

// round is one sampling round of two GPUs at t: GPU 0 used by PID 10, GPU 1
// by PID 20; GPU 1 lacks GPM (absent, not zero).
func round(t uint64, util0, sm0 float64, throttle uint64) []events.GPUSample {
	a, b := events.NewGPUSample(0, t), events.NewGPUSample(1, t)
	a.GPUUtil, a.SMActive, a.PowerW, a.Throttle, a.ThrottleKnown = util0, sm0, 400, throttle, true
	a.ECCCorrected = float64(t / ms) // grows by 100 a round
	a.Procs = []events.GPUProcess{{PID: 10, SMUtil: util0 / 2, MemUsed: 1 << 30, MemUtil: math.NaN()}}
	b.GPUUtil, b.PowerW = 5, 100
	b.Procs = []events.GPUProcess{{PID: 20, SMUtil: math.NaN(), MemUsed: 2 << 30, MemUtil: math.NaN()}}
	return []events.GPUSample{a, b}
}

func twoGPUs() *GPUs {
	return NewGPUs([]events.GPU{{Index: 0, UUID: "GPU-a"}, {Index: 1, UUID: "GPU-b"}}, 100*time.Millisecond)
}

func TestJoinGPU(t *testing.T) {
	g := twoGPUs()
	g.Add(round(100*ms, 90, 0.8, 0))
	g.Add(round(200*ms, 70, 0.6, 0x4)) // software power cap
	g.Add(round(300*ms, 50, 0.4, 0x1)) // GPU idle: not a slowdown
	long := Step{PID: 10, StartNS: 150 * ms, EndNS: 350 * ms}
	g.join(&long)
	if long.GPU == nil || long.GPU.Samples != 2 || long.GPU.Util != 60 || math.Abs(long.GPU.SMActive-0.5) > 1e-9 ||
		long.GPU.ProcSMUtil != 30 || long.GPU.Throttle != 0x4 {
		t.Fatalf("a step over two samples: %+v, want the mean of the samples at 200 and 300 ms, power cap only", long.GPU)
	}
	short := Step{PID: 10, StartNS: 360 * ms, EndNS: 370 * ms}
	g.join(&short)
	if short.GPU == nil || short.GPU.Samples != 1 || short.GPU.Util != 50 {
		t.Fatalf("a step shorter than the interval: %+v, want the sample before its end", short.GPU)
	}
	stale := Step{PID: 10, StartNS: 900 * ms, EndNS: 910 * ms}
	if g.join(&stale); stale.GPU != nil {
		t.Errorf("a step 610 ms after the last sample was joined with it: %+v", stale.GPU)
	}
	other := Step{PID: 20, StartNS: 150 * ms, EndNS: 350 * ms}
	g.join(&other)
	if other.GPU == nil || other.GPU.GPUs[0] != 1 || other.GPU.Util != 5 || events.Has(other.GPU.SMActive) {
		t.Fatalf("PID 20's step: %+v, want GPU 1 with SM activity absent", other.GPU)
	}
	b, err := json.Marshal(other.GPU)
	if err != nil {
		t.Fatal(err)
	}
	if js := string(b); strings.Contains(js, "sm_active") || strings.Contains(js, "proc_sm_util") || !strings.Contains(js, `"util_pct":5`) {
		t.Errorf("JSON %s: absent fields must be left out, read ones kept", js)
	}
	unknown := Step{PID: 30, StartNS: 150 * ms, EndNS: 350 * ms}
	if g.join(&unknown); unknown.GPU != nil {
		t.Errorf("a process on no sampled GPU, with two GPUs sampled, was joined: %+v", unknown.GPU)
	}
}

func TestGPURunsAndGroups(t *testing.T) {
	g := twoGPUs()
	for i := uint64(1); i <= 10; i++ {
		var throttle uint64
		if i > 7 {
			throttle = 0x40 // hardware thermal slowdown
		}
		g.Add(round(i*100*ms, float64(10*i), 0.5, throttle))
	}
	g.AddXid(events.Xid{GPU: 1, Code: 79})
	runs := g.Runs()
	r0, r1 := runs[0], runs[1]
	if r0.Samples != 10 || r0.Util.Mean != 55 || r0.Util.Min != 10 || r0.Util.Max != 100 || r0.ECCCorrected != 900 {
		t.Errorf("GPU 0's run: %+v", r0)
	}
	if r0.Throttled["hardware thermal slowdown"] != 3 || len(r0.Throttled) != 1 {
		t.Errorf("GPU 0 throttled %v, want hardware thermal slowdown in 3 samples", r0.Throttled)
	}
	if r1.SMActive.N != 0 || len(r1.Xids) != 1 || r1.Xids[0] != 79 || len(r1.PIDs) != 1 || r1.PIDs[0] != 20 {
		t.Errorf("GPU 1's run: %+v, want no SM activity, Xid 79, PID 20", r1)
	}
	groups := Groups(runs, []NamedGPUs{{"target", []int{0}}, {"all", []int{0, 1}}})
	if groups[0].Util != 55 || groups[0].Throttled != 1 || groups[1].Util != 30 || groups[1].PowerW != 500 ||
		groups[1].SMActive != 0.5 {
		t.Errorf("groups %+v", groups)
	}
}

func TestHardwareVerdict(t *testing.T) {
	computeBound := func(sm float64, throttled map[string]int) Summary {
		s := Summary{Steps: 100, WallTime: Dist{N: 100, P50: 0.02}, ComputeTime: Dist{N: 100, P50: 0.018},
			DataTime: Dist{N: 100, P50: 0.001}, Launches: Dist{N: 10, P50: 900}}
		s.GPU = GPUSteps{Steps: 100, Util: Dist{N: 100, P50: 99}, SMActive: Dist{N: 100, P50: sm}, Throttled: throttled}
		return s
	}
	v := Diagnose(computeBound(0.12, nil))
	if !strings.Contains(v.Bottleneck, "launch-bound") || !strings.Contains(strings.Join(v.Evidence, "\n"), "900 launches a step") {
		t.Errorf("GPU compute with SMs idle: %q %q", v.Bottleneck, v.Evidence)
	}
	v = Diagnose(computeBound(0.8, map[string]int{"software power cap": 40, "sync boost": 2}))
	ev := strings.Join(v.Evidence, "\n")
	if v.Bottleneck != "training: GPU compute" || !strings.Contains(ev, "SMs are busy") ||
		!strings.Contains(ev, "software power cap in 40% of steps") || strings.Contains(ev, "sync boost") {
		t.Errorf("GPU compute with SMs busy, power-capped: %q %q", v.Bottleneck, v.Evidence)
	}
	s := computeBound(0.1, nil)
	s.GPU = GPUSteps{}
	if v := Diagnose(s); v.Bottleneck != "training: GPU compute" || strings.Contains(strings.Join(v.Evidence, " "), "NVML") {
		t.Errorf("without NVML the verdict is the seed's alone: %q %q", v.Bottleneck, v.Evidence)
	}
}
