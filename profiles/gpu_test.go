package profiles

import (
	"maps"
	"math"
	"testing"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// TestGPUTimeSharedByLaunches: a step's measured GPU time goes to the
// launch stacks sampled in it, on any thread, by the launches each
// stands for, summing to it exactly; each launch is labelled with the
// step thread's phase at its time, and its kernel named where known. A
// step with no launch sampled is left out and counted, one without GPU
// time keeps its launches.
func TestGPUTimeSharedByLaunches(t *testing.T) {
	kernels := map[uint64]string{1: "_Z10add_kernelPfS_i", 2: "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_"}
	b := New(Config{KernelName: func(pid uint32, h uint64) (string, bool) {
		n, ok := kernels[h]
		return n, ok && pid == 100
	}})
	b.Add(launch(101, 1*s+30*ms, 3, 5)) // in the data phase, its kernel not known
	b.Add(launch(101, 1*s+60*ms, 1, 3))
	b.Add(launch(102, 1*s+70*ms, 2, 7)) // autograd's thread, in the step thread's compute
	b.Add(launch(101, 1*s+80*ms, 1, 11))
	s0 := step0
	s0.ComputeTime, s0.ComputeSource = 0.0401234567, correlate.ComputeEvents
	b.Step(s0)
	s1 := step1
	s1.ComputeTime, s1.ComputeSource = 0.05, correlate.ComputeDerived
	b.Step(s1) // launch counting was off: no stacks
	b.Add(launch(101, 1*s+250*ms, 1, 2))
	b.Step(step(2, span(correlate.PhaseCompute, 1*s+200*ms, 1*s+300*ms))) // no GPU time known
	p := only(t, b.Flush(2*s, true), TypeGPU)
	if len(p.SampleType) != 2 || p.SampleType[0].Type != "kernel_launches" || p.SampleType[0].Unit != "count" ||
		p.SampleType[1].Type != "gpu_time" || p.SampleType[1].Unit != "nanoseconds" {
		t.Fatalf("sample types %v %v", p.SampleType[0], p.SampleType[1])
	}
	const gpuNS = 40123457 // 0.0401234567 s, rounded
	st := b.Stats()
	if total(p, 1) != gpuNS || st.GPUCoveredNS != gpuNS || st.StepsCovered != 1 || st.StepsNoStacks != 1 || st.StepsNoGPUTime != 1 ||
		st.GPUNoStacksNS != 50e6 {
		t.Fatalf("gpu_time %d, stats %+v; want %d in one covered step, one without stacks, one without GPU time", total(p, 1), st, gpuNS)
	}
	if n := total(p, 0); n != 28 {
		t.Errorf("%d launches, want the 28 the samples stand for", n)
	}
	launch := "train.py train;model.py Model.forward;cudaLaunchKernel"
	wantLaunches := map[string]int64{
		launch:                          5,
		launch + ";[kernel] add_kernel": 16,
		launch + ";[kernel] at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >": 7,
	}
	if got := sum(p, 0, names); !maps.Equal(got, wantLaunches) {
		t.Errorf("launches by stack\n got %v\nwant %v", got, wantLaunches)
	}
	// By launches: 14 of 26 to add_kernel's (step 2's two have none), 7 to
	// the elementwise kernel, 5 to the unnamed one.
	for stack, w := range map[string]float64{launch: 5, launch + ";[kernel] add_kernel": 14} {
		if got := float64(sum(p, 1, names)[stack]); math.Abs(got-gpuNS*w/26) > 1 {
			t.Errorf("%s: %v ns, want %v", stack, got, gpuNS*w/26)
		}
	}
	want := map[string]int64{"compute/cuda_events": 21, "data/cuda_events": 5, "compute/none": 2}
	if got := sum(p, 0, labels2(LabelPhase, LabelGPUSource)); !maps.Equal(got, want) {
		t.Errorf("launches by phase/source %v, want %v", got, want)
	}
	want = map[string]int64{SpanID(0): gpuNS, SpanID(2): 0}
	if got := sum(p, 1, label(LabelSpanID)); !maps.Equal(got, want) {
		t.Errorf("gpu_time by span %v, want %v", got, want)
	}
}

func TestSharesSumExactly(t *testing.T) {
	for _, c := range []struct {
		total   uint64
		weights []uint64
	}{{10, []uint64{1, 1, 1}}, {1 << 62, []uint64{3, 1 << 40, 7}}, {999_999_999_999, []uint64{13, 17, 19, 23}}, {5, nil}} {
		var got uint64
		out := shares(c.total, c.weights)
		for i, x := range out {
			got += x
			if want := float64(c.total) * float64(c.weights[i]) / float64(sumOf(c.weights)); math.Abs(float64(x)-want) > 1+want*1e-12 {
				t.Errorf("%d by %v: share %d = %d, want %.0f", c.total, c.weights, i, x, want)
			}
		}
		if len(c.weights) > 0 && got != c.total {
			t.Errorf("%d by %v: shares %v sum to %d", c.total, c.weights, out, got)
		}
	}
}

func sumOf(xs []uint64) (n uint64) {
	for _, x := range xs {
		n += x
	}
	return n
}

// TestGPUTimeEnginesAndCarried: an engine thread's launches (a thread
// other than the step thread that waits for the GPU's results) get none
// of the step's GPU time, only their count; a step whose counted
// launches had none sampled gives its GPU time to the next step's
// stacks, and at the end, with no next step, is left out and counted.
func TestGPUTimeEnginesAndCarried(t *testing.T) {
	b := New(Config{})
	syncAPI, _ := cudaapi.ByName("cudaStreamSynchronize")
	b.Add(&events.Event{Kind: events.KindCall, API: syncAPI.ID, PID: 100, TID: 103, Start: 1*s + 5*ms, End: 1*s + 6*ms})
	b.Add(launch(103, 1*s+60*ms, 9, 8)) // the engine's
	b.Add(launch(101, 1*s+70*ms, 1, 2)) // the step thread's
	s0 := step0
	s0.ComputeTime, s0.ComputeSource, s0.LaunchesCounted, s0.Launches = 0.01, correlate.ComputeEvents, true, 2
	b.Step(s0)
	s1 := step1 // launches counted, none sampled: carried to step 2
	s1.ComputeTime, s1.ComputeSource, s1.LaunchesCounted, s1.Launches = 0.02, correlate.ComputeEvents, true, 1
	b.Step(s1)
	b.Add(launch(101, 1*s+250*ms, 1, 2))
	s2 := step(2, span(correlate.PhaseCompute, 1*s+200*ms, 1*s+300*ms))
	s2.ComputeTime, s2.ComputeSource, s2.LaunchesCounted, s2.Launches = 0.03, correlate.ComputeEvents, true, 2
	b.Step(s2)
	s3 := step(3, span(correlate.PhaseCompute, 1*s+300*ms, 1*s+400*ms)) // carried, and no step after it
	s3.ComputeTime, s3.ComputeSource, s3.LaunchesCounted, s3.Launches = 0.04, correlate.ComputeEvents, true, 1
	b.Step(s3)
	p := only(t, b.Flush(2*s, true), TypeGPU)
	st := b.Stats()
	if got := total(p, 1); got != 60e6 || st.GPUCoveredNS != 60e6 || st.StepsCovered != 2 || st.StepsCarried != 1 ||
		st.StepsNoStacks != 1 || st.GPUNoStacksNS != 40e6 {
		t.Fatalf("gpu_time %d, stats %+v; want steps 0-2's 60 ms (step 1's carried to 2), step 3's 40 ms left out", got, st)
	}
	if got := total(p, 0); got != 12 {
		t.Errorf("%d launches, want 12: the engine's 8 counted too", got)
	}
	for _, smp := range p.Sample {
		if smp.Value[0] == 8 && (smp.Value[1] != 0 || smp.Label[LabelGPUSource][0] != sourceEngine) {
			t.Errorf("the engine's launches: gpu_time %d, source %v; want none, %q", smp.Value[1], smp.Label[LabelGPUSource], sourceEngine)
		}
	}
}
