package topview

import (
	"testing"

	"github.com/gpuprof/gpuprof/internal/replaytest"
)

// BenchmarkModelStep is what a step costs the view under the sink's lock.
func BenchmarkModelStep(b *testing.B) {
	_, steps, _ := replaytest.Run(b, "../testdata/traces/h200-spec-pipeline/data.trace.jsonl.gz", nil, nil)
	m := New()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		m.Step(steps[i%len(steps)])
	}
}

// BenchmarkRender is one frame of a full window at a laptop terminal's
// size: the screen draws four a second.
func BenchmarkRender(b *testing.B) {
	_, steps, _ := replaytest.Run(b, "../testdata/traces/h200x2-ranks/engine-ddp-two-ranks.trace.jsonl.gz", nil, nil)
	m := New()
	for i := range steps {
		m.Step(steps[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		m.Render(160, 48)
	}
}
