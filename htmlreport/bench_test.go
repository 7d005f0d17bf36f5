package htmlreport

import (
	"io"
	"testing"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/internal/replaytest"
)

// BenchmarkCollectorStep is what a step costs the collector, which runs
// under the sink's lock beside the loop: its share of the page.
func BenchmarkCollectorStep(b *testing.B) {
	_, steps, _ := replaytest.Run(b, dataBound, nil, nil)
	c := NewCollector()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		st := steps[i%len(steps)]
		st.Index = i // one long run: the series keep merging
		c.Step(st)
	}
}

// BenchmarkWrite is the page's rendering at the end of a run, from a
// collector holding a long run's steps (its bins full).
func BenchmarkWrite(b *testing.B) {
	_, steps, loop := replaytest.Run(b, dataBound, nil, nil)
	c := NewCollector()
	for i := range 100_000 {
		st := steps[i%len(steps)]
		st.Index = i
		c.Step(st)
	}
	r := Report{Title: "bench"}
	for _, run := range loop.Runs() {
		r.Processes = append(r.Processes, Process{PID: run.PID, Run: run.Run, Engine: correlate.EngineProcess(run.Run)})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := Write(io.Discard, r, c); err != nil {
			b.Fatal(err)
		}
	}
}
