package metrics

import (
	"testing"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/internal/replaytest"
)

// slowRank1 is a trace of a two-rank DDP job on two H200s whose rank 1
// loads its data slowly: its ranks' step times match (each waits for the
// other at the all-reduce), their data times do not.
const slowRank1 = "../testdata/traces/h200x2-ranks/engine-ddp-two-ranks-slow-rank1.trace.jsonl.gz"

// fed is what a replayed trace hands an exporter, in the order a live
// run would: each step as it is cut, each GPU round as it comes.
type fed struct {
	step  *correlate.Step
	round []events.GPUSample
}

// collected is a control.Output keeping what the loop cuts.
type collected struct{ items *[]fed }

func (c collected) Step(s correlate.Step) { *c.items = append(*c.items, fed{step: &s}) }
func (collected) Note(string)             {}
func (collected) Processes(int)           {}

// replayTrace cuts a recorded trace into steps as gpuprof replay does.
func replayTrace(t *testing.T, path string) (events.TraceHeader, []fed) {
	t.Helper()
	var items []fed
	h, _, _ := replaytest.Run(t, path, func(e *events.Event) {
		if e.Kind == events.KindGPUSamples {
			items = append(items, fed{round: e.GPUs})
		}
	}, collected{&items})
	return h, items
}

func feed(e *Exporter, items []fed) {
	for _, it := range items {
		if it.step != nil {
			e.Step(*it.step)
		} else {
			e.GPUs(it.round)
		}
	}
}

func stepsOf(items []fed) []correlate.Step {
	var out []correlate.Step
	for _, it := range items {
		if it.step != nil {
			out = append(out, *it.step)
		}
	}
	return out
}
