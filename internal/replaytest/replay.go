// Package replaytest cuts a committed trace into steps as gpuprof replay
// does, handing every event to a tap and every step to an output, for the
// tests of the outputs drawn from a whole run (htmlreport, perfetto).
package replaytest

import (
	"log/slog"
	"testing"

	"github.com/gpuprof/gpuprof/control"
	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/internal/tracecfg"
)

// Run replays the trace at path: tap sees each event before the loop does
// (nil: none), out each step the loop cuts; it returns the trace's
// header, the steps and the loop, finished.
func Run(t testing.TB, path string, tap func(*events.Event), out control.Output) (events.TraceHeader, []correlate.Step, *control.Loop) {
	t.Helper()
	h, evs, _, err := events.ReadTrace(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := control.DefaultConfig()
	cfg.Log = slog.New(slog.DiscardHandler)
	if cfg.Correlate, err = tracecfg.Correlate(h); err != nil {
		t.Fatal(err)
	}
	kept := &keep{out: out}
	l, err := control.New(cfg, nil, kept)
	if err != nil {
		t.Fatal(err)
	}
	for i := range evs {
		if tap != nil {
			tap(&evs[i])
		}
		l.Add(&evs[i])
	}
	l.Finish()
	return h, kept.steps, l
}

// keep keeps the steps and passes everything on.
type keep struct {
	out   control.Output
	steps []correlate.Step
}

func (k *keep) Step(s correlate.Step) {
	k.steps = append(k.steps, s)
	if k.out != nil {
		k.out.Step(s)
	}
}

func (k *keep) Note(msg string) {
	if k.out != nil {
		k.out.Note(msg)
	}
}

func (k *keep) Processes(n int) {
	if k.out != nil {
		k.out.Processes(n)
	}
}
