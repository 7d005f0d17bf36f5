package control

import (
	"fmt"
	"slices"
	"time"

	"github.com/gpuprof/gpuprof/correlate"
)

// call is one call the loop made of its probes or its output.
type call struct {
	op         string // the method, or "note" and "step" for the output
	pid        int
	tid        uint32
	period, on time.Duration // SampleLaunches
	step       time.Duration // FitLaunchPhases
	keep       []string      // the Python wait calls
	writes     bool
	note       string
}

func (c call) String() string {
	switch c.op {
	case "sample", "more":
		return fmt.Sprintf("%s %d %v %v", c.op, c.pid, c.keep, c.writes)
	case "all":
		return fmt.Sprintf("all %d", c.pid)
	}
	type plain call // no String method: printed field by field
	return fmt.Sprintf("%+v", plain(c))
}

// fakeProbes records the calls the loop makes of its probes and says yes
// to each; as the loop's output too, it records steps and notes in the
// same order.
type fakeProbes struct {
	calls []call
	steps []correlate.Step
	procs int
}

func (f *fakeProbes) SetStepThread(pid int, tid uint32) {
	f.calls = append(f.calls, call{op: "thread", pid: pid, tid: tid})
}

func (f *fakeProbes) LearnLaunches(pid int, period, on time.Duration) {
	f.calls = append(f.calls, call{op: "learn", pid: pid, period: period, on: on})
}

func (f *fakeProbes) SampleLaunches(pid int, period, on time.Duration) {
	f.calls = append(f.calls, call{op: "launches", pid: pid, period: period, on: on})
}

func (f *fakeProbes) FitLaunchPhases(pid int, step time.Duration) {
	f.calls = append(f.calls, call{op: "fit", pid: pid, step: step})
}

func (f *fakeProbes) NarrowRecords(pid int) { f.calls = append(f.calls, call{op: "records", pid: pid}) }

func (f *fakeProbes) SamplePythonWaits(pid int, keep []string, writes bool) bool {
	f.calls = append(f.calls, call{op: "sample", pid: pid, keep: slices.Clone(keep), writes: writes})
	return true
}

func (f *fakeProbes) KeepMorePythonWaits(pid int, keep []string, writes bool) bool {
	f.calls = append(f.calls, call{op: "more", pid: pid, keep: slices.Clone(keep), writes: writes})
	return true
}

func (f *fakeProbes) KeepPythonWaits(pid int) bool {
	f.calls = append(f.calls, call{op: "all", pid: pid})
	return true
}

func (f *fakeProbes) Step(s correlate.Step) {
	f.steps = append(f.steps, s)
	f.calls = append(f.calls, call{op: "step", pid: int(s.PID)})
}

func (f *fakeProbes) Note(msg string) { f.calls = append(f.calls, call{op: "note", note: msg}) }

func (f *fakeProbes) Processes(n int) { f.procs = n }

// of are the calls of op made for pid, in order.
func (f *fakeProbes) of(op string, pid int) []call {
	var out []call
	for _, c := range f.calls {
		if c.op == op && c.pid == pid {
			out = append(out, c)
		}
	}
	return out
}

// lines are the calls as text, steps and notes left out.
func (f *fakeProbes) lines() []string {
	var out []string
	for _, c := range f.calls {
		if c.op != "step" && c.op != "note" {
			out = append(out, c.String())
		}
	}
	return out
}
