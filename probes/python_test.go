package probes

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/internal/testenv"
)

// TestPythonQueueWaits attaches to a real CPython blocked in
// queue.Queue.get and holds each wait gpuprof saw to the program's own
// log, with the Python functions that waited.
func TestPythonQueueWaits(t *testing.T) {
	testenv.RequireRoot(t)
	for name, python := range testenv.Pythons(t) {
		for _, prog := range []struct{ script, call string }{
			{"queue_waits.py", "queue.py"}, {"mp_waits.py", "multiprocessing/queues.py"},
		} {
			script := filepath.Join(testenv.Root(), "testdata", "python", prog.script)
			t.Run(name+"/"+prog.script, func(t *testing.T) {
				s := openSession(t)
				truth := filepath.Join(t.TempDir(), "waits.jsonl")
				cmd := exec.Command(python, script, "12", "0.03", "0.5", truth)
				cmd.Dir = t.TempDir()
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
				time.Sleep(200 * time.Millisecond)
				plans, err := s.Attach(cmd.Process.Pid)
				if err != nil {
					t.Fatal(err)
				}
				var py *PythonPlan
				for _, p := range plans {
					if p.Python != nil {
						py = p.Python
					}
				}
				if py == nil || py.Err != nil {
					t.Fatalf("interpreter plan %+v", py)
				}
				c, err := runFor(t, s, 20*time.Second)
				if !errors.Is(err, ErrTargetsExited) {
					t.Fatal(err)
				}
				var waits []events.Event
				for _, e := range c.evs {
					if e.Kind == events.KindPyWait {
						waits = append(waits, e)
					}
				}
				data, err := os.ReadFile(truth)
				if err != nil {
					t.Fatal(err)
				}
				matched := 0
				for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
					var w struct {
						Start uint64  `json:"t_start_ns"`
						End   uint64  `json:"t_end_ns"`
						Wait  float64 `json:"wait"`
					}
					json.Unmarshal([]byte(line), &w)
					if w.Wait < 0.005 {
						continue // the item was there already
					}
					for _, e := range waits {
						// The consumer is the main thread; the producer's
						// sleeps are waits too.
						if e.TID == uint32(cmd.Process.Pid) && e.Start >= w.Start && e.End <= w.End {
							matched++
							got := float64(e.End-e.Start) / 1e9
							if got < 0.95*w.Wait || got > w.Wait {
								t.Errorf("wait %.4fs, the program measured %.4fs around it", got, w.Wait)
							}
							if !hasFrame(e.Frames, prog.call, "get") || !hasFrame(e.Frames, prog.script, "consume") {
								t.Errorf("frames %+v, want the queue's get called from consume", e.Frames)
							}
							break
						}
					}
				}
				if matched < 8 {
					t.Fatalf("matched %d blocking gets of the program's log to gpuprof's %d waits", matched, len(waits))
				}
			})
		}
	}
}

// hasFrame reports whether a frame of function fn (qualified or not) in a
// file ending in file is among frames.
func hasFrame(frames []events.PyFrame, file, fn string) bool {
	for _, f := range frames {
		if strings.HasSuffix(f.File, file) && (f.Func == fn || strings.HasSuffix(f.Func, "."+fn)) {
			return true
		}
	}
	return false
}

// TestPythonLayouts checks the offsets table against each version's own
// headers, compiled with offsetof.
func TestPythonLayouts(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.Skip(t, "needs gcc to compile testdata/python/offsets.c")
	}
	src := filepath.Join(testenv.Root(), "testdata", "python", "offsets.c")
	for name, python := range testenv.Pythons(t) {
		if !strings.HasPrefix(name, "pyenv-") {
			continue
		}
		minor, _ := strconv.Atoi(strings.TrimPrefix(name, "pyenv-3."))
		include := filepath.Join(filepath.Dir(filepath.Dir(python)), "include", "python3."+strconv.Itoa(minor))
		bin := filepath.Join(t.TempDir(), "offsets")
		if out, err := exec.Command("gcc", "-I"+include, "-o", bin, src).CombinedOutput(); err != nil {
			t.Fatalf("%s: compile offsets.c: %v\n%s", name, err, out)
		}
		out, err := exec.Command(bin).Output()
		if err != nil {
			t.Fatal(err)
		}
		want := pyLayouts[minor]
		v := reflect.ValueOf(want)
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			field, val, _ := strings.Cut(line, " ")
			n, _ := strconv.ParseInt(val, 10, 64)
			if got := v.FieldByName(field); !got.IsValid() || got.Convert(reflect.TypeOf(int64(0))).Int() != n {
				t.Errorf("Python 3.%d: %s is %d in the headers, %v in pyLayouts", minor, field, n, got)
			}
		}
	}
}
