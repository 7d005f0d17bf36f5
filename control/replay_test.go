package control

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/internal/tracecfg"
	"github.com/gpuprof/gpuprof/report"
)

// The traces recorded on the GPU hosts (testdata/traces), replayed through
// the loop with a fake that records what the probes are told.

var update = flag.Bool("update", false, "rewrite "+goldenSteps+" from the steps the traces replay to now")

// goldenSteps holds, by trace, the digest and count of the --jsonl lines
// gpuprof replay wrote for it, first as it did before the loop left
// cmd/gpuprof: a change to the steps is a change to correlate, not
// something steering the probes may do.
const goldenSteps = "testdata/replay-steps.golden"

// recorded is one trace, read once for every replay of it.
type recorded struct {
	name string // its folder and name under testdata/traces
	h    events.TraceHeader
	evs  []events.Event
}

var readTraces = sync.OnceValues(func() ([]recorded, error) {
	paths, _ := filepath.Glob("../testdata/traces/*/*.trace.jsonl.gz")
	if len(paths) == 0 {
		return nil, fmt.Errorf("no traces under testdata/traces")
	}
	var out []recorded
	for _, p := range paths {
		h, evs, unknown, err := events.ReadTrace(p)
		if err != nil {
			return nil, err
		}
		if unknown != 0 {
			return nil, fmt.Errorf("%s: %d events of entry points this build does not know", p, unknown)
		}
		name := filepath.Base(filepath.Dir(p)) + "/" + strings.TrimSuffix(filepath.Base(p), ".trace.jsonl.gz")
		out = append(out, recorded{name, h, evs})
	}
	return out, nil
})

func traces(t *testing.T) []recorded {
	t.Helper()
	trs, err := readTraces()
	if err != nil {
		t.Fatal(err)
	}
	return trs
}

func trace(t *testing.T, name string) recorded {
	t.Helper()
	for _, tr := range traces(t) {
		if tr.name == name {
			return tr
		}
	}
	t.Fatalf("no trace %s", name)
	return recorded{}
}

// configFor is attach's policy for tr, its correlators configured as
// gpuprof replay configures them from the trace's header.
func configFor(t *testing.T, tr recorded) Config {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Log = slog.New(slog.DiscardHandler)
	var err error
	if cfg.Correlate, err = tracecfg.Correlate(tr.h); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// replay runs tr through a loop of cfg, steering the fake it returns
// (steer false: no probes, as gpuprof replay runs it).
func replay(t *testing.T, tr recorded, cfg Config, steer bool) (*Loop, *fakeProbes) {
	t.Helper()
	f := &fakeProbes{}
	var p Probes
	if steer {
		p = f
	}
	l, err := New(cfg, p, f)
	if err != nil {
		t.Fatal(err)
	}
	evs := slices.Clone(tr.evs)
	for i := range evs {
		n := len(f.calls)
		l.Add(&evs[i])
		if len(f.calls) > n {
			f.calls = append(f.calls, call{op: "added"}) // what one event made the loop do ends here
		}
	}
	l.Finish()
	return l, f
}

// digest is the SHA-256 of steps as --jsonl writes them.
func digest(t *testing.T, steps []correlate.Step) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "steps.jsonl")
	j, err := report.CreateJSONL(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if err := j.Write(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(data))
}

// TestReplayStepsAsBefore: every trace replays to the steps gpuprof
// replay cut from it (goldenSteps), and steering the probes changes none
// of them: a replay with probes gives the steps one without gives.
func TestReplayStepsAsBefore(t *testing.T) {
	data, err := os.ReadFile(goldenSteps)
	if err != nil && !*update {
		t.Fatal(err)
	}
	want := map[string]string{}
	for line := range strings.Lines(string(data)) {
		name, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		want[name] = rest
	}
	var got []string
	for _, tr := range traces(t) {
		_, steered := replay(t, tr, configFor(t, tr), true)
		_, plain := replay(t, tr, configFor(t, tr), false)
		// Compared as written: a step's missing GPU readings are NaNs.
		sum := digest(t, steered.steps)
		if len(steered.steps) != len(plain.steps) || sum != digest(t, plain.steps) {
			t.Errorf("%s: %d steps with probes steered, %d without, or they differ", tr.name, len(steered.steps), len(plain.steps))
		}
		line := fmt.Sprintf("%s %d", sum, len(steered.steps))
		got = append(got, tr.name+" "+line)
		if !*update && want[tr.name] != line {
			t.Errorf("%s: steps %s, want %s (%s)", tr.name, line, want[tr.name], goldenSteps)
		}
	}
	if *update {
		if err := os.WriteFile(goldenSteps, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
