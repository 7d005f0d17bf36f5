package perfetto

import (
	"bytes"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gpuprof/gpuprof/control"
	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/internal/tracecfg"
)

// The traces recorded on the GPU hosts (testdata/traces), replayed as
// gpuprof replays them: every event to the Writer, then to a loop (no
// probes to steer) whose output is the Writer too.

const (
	specData = "h200-spec-pipeline/data" // Python waits, GIL waits, a pool
	twoRanks = "h200x2-ranks/engine-ddp-two-ranks"
)

type recorded struct {
	h   events.TraceHeader
	evs []events.Event
}

var (
	tracesMu sync.Mutex
	read     = map[string]recorded{}
)

func readTrace(t testing.TB, name string) recorded {
	t.Helper()
	tracesMu.Lock()
	defer tracesMu.Unlock()
	if r, ok := read[name]; ok {
		return r
	}
	h, evs, unknown, err := events.ReadTrace("../testdata/traces/" + name + ".trace.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	if unknown != 0 {
		t.Fatalf("%s: %d events of entry points this build does not know", name, unknown)
	}
	read[name] = recorded{h, evs}
	return read[name]
}

// tee is the loop's output: the Writer, and the steps kept to check
// the file by.
type tee struct {
	w     *Writer
	steps []correlate.Step
}

func (o *tee) Step(s correlate.Step) { o.steps = append(o.steps, s); o.w.Step(s) }
func (o *tee) Note(msg string)       { o.w.Note(msg) }
func (o *tee) Processes(n int)       { o.w.Processes(n) }

type replayed struct {
	recorded
	data  []byte
	stats Stats
	steps []correlate.Step
	user  map[uint16]correlate.UserProbe
}

func replay(t *testing.T, name string, maxBytes int64) replayed {
	t.Helper()
	tr := readTrace(t, name)
	ccfg, err := tracecfg.Correlate(tr.h)
	if err != nil {
		t.Fatal(err)
	}
	cfg := control.DefaultConfig()
	cfg.Correlate = ccfg
	cfg.Log = slog.New(slog.DiscardHandler)
	var buf bytes.Buffer
	w := New(&buf, Options{User: ccfg.User, MaxBytes: maxBytes})
	out := &tee{w: w}
	loop, err := control.New(cfg, nil, out)
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]events.Event, len(tr.evs))
	copy(evs, tr.evs)
	for i := range evs {
		w.Event(&evs[i])
		loop.Add(&evs[i])
	}
	loop.Finish()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.Bytes != int64(buf.Len()) {
		t.Errorf("Stats.Bytes %d, %d written", st.Bytes, buf.Len())
	}
	return replayed{tr, buf.Bytes(), st, out.steps, ccfg.User}
}

// TestReplayFile: the files of the traces parse, nest, and hold what the
// stats say, every step (its phases summing to it), and every event that
// held a thread, at its times.
func TestReplayFile(t *testing.T) {
	for _, name := range []string{specData, twoRanks} {
		t.Run(name, func(t *testing.T) {
			r := replay(t, name, 0)
			p := parse(t, r.data)
			st := r.stats
			if st.Truncated || st.Dropped != 0 {
				t.Errorf("stats %+v: truncated or dropped", st)
			}
			if st.Slices != len(p.slices) {
				t.Errorf("Stats.Slices %d, %d in the file", st.Slices, len(p.slices))
			}
			n := 0
			for _, cs := range p.counters {
				n += len(cs)
			}
			if st.Counters != n {
				t.Errorf("Stats.Counters %d, %d in the file", st.Counters, n)
			}
			checkSteps(t, r, p)
			checkThreadSlices(t, r, p)
			t.Logf("%d bytes, %+v", len(r.data), st)
		})
	}
}

// checkSteps: one step slice for each step the loop emitted, at its times,
// with its measures, and its phases inside it, exactly its timeline.
func checkSteps(t *testing.T, r replayed, p *parsed) {
	t.Helper()
	type at struct {
		pid   uint32
		start uint64
	}
	bySpan := map[at]slice{}
	steps := 0
	for _, s := range p.slices {
		if strings.HasPrefix(s.name, "step ") {
			steps++
			bySpan[at{s.pid, s.start}] = s
			if !strings.HasPrefix(p.threadNames[trackKey{s.pid, s.tid}], "steps (thread ") {
				t.Errorf("step %s on track %q", s.name, p.threadNames[trackKey{s.pid, s.tid}])
			}
		}
	}
	if steps != len(r.steps) || r.stats.Steps != steps || steps == 0 {
		t.Fatalf("%d step slices, Stats.Steps %d, %d steps emitted", steps, r.stats.Steps, len(r.steps))
	}
	withPhases := 0
	for _, st := range r.steps {
		s, ok := bySpan[at{st.PID, st.StartNS - p.origin}]
		if !ok {
			t.Fatalf("step %d of PID %d at %d: no slice", st.Index, st.PID, st.StartNS)
		}
		if s.name != fmt.Sprintf("step %d", st.Index) || s.dur != st.EndNS-st.StartNS {
			t.Errorf("step %d: slice %s of %d ns, want %d", st.Index, s.name, s.dur, st.EndNS-st.StartNS)
		}
		if got := s.args["step_time_ms"].(float64); math.Abs(got-st.StepTime*1e3) > 1e-6 {
			t.Errorf("step %d: step_time_ms %v, step_time %v s", st.Index, got, st.StepTime)
		}
		if got := s.args["wall_time_ms"].(float64); math.Abs(got-st.WallTime*1e3) > 1e-6 {
			t.Errorf("step %d: wall_time_ms %v, wall_time %v s", st.Index, got, st.WallTime)
		}
		if st.PoolMeasured && s.args["pool"].(float64) != float64(st.Pool) {
			t.Errorf("step %d: pool %v, want %d", st.Index, s.args["pool"], st.Pool)
		}
		kids := inside(p.tracks[trackKey{s.pid, s.tid}], s)
		if len(kids) != len(st.Phases) {
			t.Fatalf("step %d: %d slices inside, %d phases", st.Index, len(kids), len(st.Phases))
		}
		var sum uint64
		for i, k := range kids {
			ph := st.Phases[i]
			if k.name != string(ph.Phase) || k.start != ph.StartNS-p.origin || k.dur != ph.EndNS-ph.StartNS {
				t.Errorf("step %d: phase slice %s [%d +%d], want %s [%d +%d]", st.Index, k.name, k.start, k.dur,
					ph.Phase, ph.StartNS-p.origin, ph.EndNS-ph.StartNS)
			}
			sum += k.dur
		}
		if len(kids) > 0 {
			withPhases++
			if sum != s.dur {
				t.Errorf("step %d: phases sum to %d ns, the step %d", st.Index, sum, s.dur)
			}
		}
	}
	if withPhases < len(r.steps)/2 {
		t.Errorf("only %d of %d steps have phases", withPhases, len(r.steps))
	}
}

// heldThread says whether e is an event the file has a slice for, and its
// name there.
func heldThread(e *events.Event, user map[uint16]correlate.UserProbe) (string, bool) {
	switch e.Kind {
	case events.KindPyWait:
		kind, what := correlate.DescribeWait(e)
		name := "wait " + kind.String()
		if what != "" {
			name += ": " + what
		}
		return name, true
	case events.KindPyGIL:
		return "GIL", true
	case events.KindCall:
		if e.API >= cudaapi.UserBase {
			u := user[e.API]
			return string(u.Role) + ": " + u.Name, true
		}
		a := e.Desc()
		return a.Name, a.Class == cudaapi.ClassSync || a.Class == cudaapi.ClassCopy
	}
	return "", false
}

// checkThreadSlices: each event that held a thread is one slice of its
// name and times, on its thread's track or an overlaps lane of it, and
// nothing else is.
func checkThreadSlices(t *testing.T, r replayed, p *parsed) {
	t.Helper()
	type key struct {
		pid        uint32
		name       string
		start, dur uint64
	}
	want := map[key]int{}
	kinds := map[events.Kind]int{}
	tidOf := map[key]uint32{}
	stacks := map[key]string{}
	for i := range r.evs {
		e := &r.evs[i]
		name, ok := heldThread(e, r.user)
		if !ok {
			continue
		}
		k := key{e.PID, name, e.Start - p.origin, e.End - e.Start}
		want[k]++
		tidOf[k] = e.TID
		kinds[e.Kind]++
		if e.Kind == events.KindPyWait {
			var fs []string
			for _, f := range e.Frames[:min(len(e.Frames), maxFrames)] {
				fs = append(fs, f.Func+" ("+filepath.Base(f.File)+")")
			}
			if len(e.Frames) > maxFrames {
				fs = append(fs, "...")
			}
			stacks[k] = e.Name + "|" + strings.Join(fs, " < ")
		}
	}
	got := map[key]int{}
	lanes := 0
	for _, s := range p.slices {
		if strings.HasPrefix(s.name, "step ") || p.threadNames[trackKey{s.pid, s.tid}] == "" ||
			strings.HasPrefix(p.threadNames[trackKey{s.pid, s.tid}], "steps (") {
			continue
		}
		k := key{s.pid, s.name, s.start, s.dur}
		got[k]++
		tn := p.threadNames[trackKey{s.pid, s.tid}]
		if s.tid != tidOf[k] {
			lanes++
			if !strings.HasPrefix(tn, fmt.Sprintf("thread %d (overlaps", tidOf[k])) {
				t.Errorf("%s of thread %d on track %d %q", s.name, tidOf[k], s.tid, tn)
			}
		}
		if want, ok := stacks[k]; ok && fmt.Sprintf("%v|%v", s.args["libc"], s.args["stack"]) != want {
			t.Errorf("wait slice %s: args %v, want %s", s.name, s.args, want)
		}
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%+v: %d slices, %d events", k, got[k], n)
		}
	}
	for k, n := range got {
		if want[k] == 0 {
			t.Errorf("%+v: %d slices of no event", k, n)
		}
	}
	if lanes != r.stats.Overlaps {
		t.Errorf("%d slices on lanes, Stats.Overlaps %d", lanes, r.stats.Overlaps)
	}
	if kinds[events.KindPyWait] == 0 || kinds[events.KindCall] == 0 {
		t.Errorf("events that held a thread: %v", kinds)
	}
	t.Logf("thread slices by kind %v, %d on lanes", kinds, lanes)
}

// The Writer is the loop's output as it is.
var _ control.Output = (*Writer)(nil)
