package report

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
)

func TestWriteGPUs(t *testing.T) {
	stat := func(mean float64) correlate.Stat { return correlate.Stat{N: 10, Mean: mean, Min: mean, Max: mean} }
	runs := []correlate.GPURun{
		{GPU: events.GPU{Index: 0, UUID: "GPU-a"}, Samples: 10, Util: stat(84), SMActive: stat(0.67), MemUsed: stat(4 << 30),
			MemTotal: 140 << 30, PowerW: stat(612), PowerLimitW: 700, TempC: stat(54), PIDs: []uint32{505, 77},
			Throttled: map[string]int{"software power cap": 3}, ECCCorrected: 0, ECCUncorrected: math.NaN()},
		{GPU: events.GPU{Index: 1, UUID: "GPU-b"}, Samples: 10, Util: stat(5), Xids: []uint64{79}},
		{GPU: events.GPU{Index: 2, UUID: "GPU-c"}},
	}
	groups := correlate.Groups(runs, []correlate.NamedGPUs{{Name: "target", GPUs: []int{0, 1}}})
	var b bytes.Buffer
	WriteGPUs(&b, runs, groups, map[uint32][]int{505: {1, 0}})
	out := b.String()
	for _, want := range []string{
		"84%  0.67", "4.0GiB of 140.0GiB", "612W of 700W", "54C", "505 (cuda:1) 77",
		"gpu 0 (GPU-a): software power cap in 30% of samples",
		"gpu 1 (GPU-b): Xid 79",
		"not sampled (GPU-c)",
		"target   0,1   44%  0.67   612W",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("GPU table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ECC") {
		t.Errorf("no ECC errors counted, yet a line says so:\n%s", out)
	}
}
