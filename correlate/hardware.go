package correlate

import (
	"fmt"
	"slices"
	"strings"
)

// Thresholds for reading the GPUs' own counters (NVML) against a verdict.
const (
	// busySM: GPM SM activity at least this while steps run is a GPU kept
	// busy, as a compute-bound verdict expects.
	busySM = 0.5
	// idleSM: below this, a "GPU compute" step mostly leaves the SMs idle:
	// the GPU waits on the host to launch work (many short kernels).
	idleSM = 0.3
	// throttledShare: a slowdown reason active in at least this share of
	// the steps is worth a line.
	throttledShare = 0.1
)

// hardware adds what the step's GPUs said while the steps ran (NVML) to a
// verdict: a compute-bound verdict is only trusted when the SMs were busy;
// idle SMs under a compute-bound loop mean launch-bound; clocks slowed by
// power or heat explain a slow GPU.
func hardware(v *Verdict, s Summary) {
	g := s.GPU
	if g.Steps == 0 {
		return
	}
	var parts []string
	if g.Util.N > 0 {
		parts = append(parts, fmt.Sprintf("utilization median %.0f%%", g.Util.P50))
	}
	if g.SMActive.N > 0 {
		parts = append(parts, fmt.Sprintf("SM activity %.2f", g.SMActive.P50))
	}
	if g.TensorActive.N > 0 {
		parts = append(parts, fmt.Sprintf("tensor activity %.2f", g.TensorActive.P50))
	}
	if g.PowerW.N > 0 {
		parts = append(parts, fmt.Sprintf("power %.0f W", g.PowerW.P50))
	}
	if g.SMClockMHz.N > 0 {
		parts = append(parts, fmt.Sprintf("SM clock %.0f MHz", g.SMClockMHz.P50))
	}
	if len(parts) > 0 {
		v.Evidence = append(v.Evidence, "GPU while the steps ran (NVML): "+strings.Join(parts, ", "))
	}
	if strings.Contains(v.Bottleneck, "GPU compute") && g.SMActive.N > 0 {
		switch sm := g.SMActive.P50; {
		case sm < idleSM:
			v.Bottleneck += " (launch-bound: the SMs are mostly idle)"
			launches := ""
			if s.Launches.N > 0 {
				launches = fmt.Sprintf(", %.0f launches a step", s.Launches.P50)
			}
			v.Evidence = append(v.Evidence, fmt.Sprintf("SM activity %.2f while compute dominates the step%s: the GPU waits for the host to give it work", sm, launches))
			v.Next = slices.Insert(v.Next, 0, "fewer, larger kernels: CUDA graphs or torch.compile, a larger batch")
		case sm >= busySM:
			v.Evidence = append(v.Evidence, fmt.Sprintf("SM activity %.2f: the SMs are busy, as a compute-bound step should be", sm))
		}
	}
	var reasons []string
	for name, n := range g.Throttled {
		if float64(n) >= throttledShare*float64(g.Steps) {
			reasons = append(reasons, fmt.Sprintf("%s in %.0f%% of steps", name, 100*float64(n)/float64(g.Steps)))
		}
	}
	if len(reasons) > 0 {
		slices.Sort(reasons)
		v.Evidence = append(v.Evidence, "GPU clocks slowed: "+strings.Join(reasons, ", "))
		v.Next = append(v.Next, "the GPU runs below its clocks: check its cooling and power limit (nvidia-smi -q -d PERFORMANCE)")
	}
}
