package probes

import (
	"errors"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/internal/testenv"
)

// TestStackSamples attaches with every kind of stack sample to the
// stand-in pipeline on each CPython: CPU samples of its threads, the
// launches' stacks (one in four) and those of its syncs and copies, each
// with the pipeline's own Python functions named and native frames named
// from the libraries' symbols.
func TestStackSamples(t *testing.T) {
	testenv.RequireRoot(t)
	dir := testenv.Fixtures(t)
	script := filepath.Join(testenv.Root(), "testdata", "python", "pipeline.py")
	for name, python := range testenv.Pythons(t) {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Launches = true
			cfg.Stacks = StackConfig{CPUHz: 97, LaunchEvery: 4, Calls: true}
			s, err := Open(cfg)
			if err != nil {
				t.Fatalf("open session: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			cmd := exec.Command(python, script, dir, "--mode", "compute", "--steps", "150", "--truth",
				filepath.Join(t.TempDir(), "truth.jsonl"), "--start-delay", "0.5")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			time.Sleep(300 * time.Millisecond)
			if _, err := s.Attach(cmd.Process.Pid); err != nil {
				t.Fatal(err)
			}
			c, err := runFor(t, s, 30*time.Second)
			if !errors.Is(err, ErrTargetsExited) {
				t.Fatal(err)
			}
			pid := uint32(cmd.Process.Pid)
			byKind := map[events.Kind][]events.Event{}
			for _, e := range c.evs {
				if e.Kind.IsStack() {
					if e.PID != pid {
						t.Fatalf("a stack sample of PID %d, not the target's %d", e.PID, pid)
					}
					byKind[e.Kind] = append(byKind[e.Kind], e)
				}
			}
			// The trainer's loop is the script's module level: its
			// launches are made in launch(), called from <module>.
			launches := byKind[events.KindLaunchStack]
			if len(launches) < 150*100/4/2 {
				t.Errorf("%d launch stacks, want about %d (150 steps of 100 launches, one in 4)", len(launches), 150*100/4)
			}
			named, trainer := 0, 0
			for _, e := range launches {
				if e.Args[1] != 4 || e.Args[0] == 0 {
					t.Fatalf("launch stack weight %d, kernel %#x: want 4 and the kernel's handle", e.Args[1], e.Args[0])
				}
				if e.TID != pid {
					continue // an engine thread's
				}
				trainer++
				if hasFrame(e.Frames, "pipeline.py", "launch") && hasFrame(e.Frames, "pipeline.py", "<module>") {
					named++
				}
			}
			if named < trainer*9/10 || trainer == 0 {
				t.Errorf("%d of the trainer's %d launch stacks name pipeline.py's launch() under <module>", named, trainer)
			}
			calls := byKind[events.KindCallStack]
			syncs := 0
			for _, e := range calls {
				if a, ok := cudaapi.ByID(e.API); ok && a.Class == cudaapi.ClassSync && hasFrame(e.Frames, "pipeline.py", "<module>") {
					syncs++
				}
				if e.End < e.Start {
					t.Fatalf("call stack ends before it starts: %+v", e)
				}
			}
			if syncs < 100 {
				t.Errorf("%d sync stacks from pipeline.py's loop, want one a step (150)", syncs)
			}
			// Native frames: the stand-in runtime's own function, named
			// from its symbols, at the innermost frame of a call's stack.
			innermost := map[string]int{}
			for _, e := range calls {
				if len(e.Native) > 0 {
					innermost[e.Native[0].Module+" "+e.Native[0].Func]++
				}
			}
			if !slices.ContainsFunc(slices.Collect(maps.Keys(innermost)), func(k string) bool {
				return strings.HasPrefix(k, "libcudart.so.13 cuda")
			}) {
				t.Errorf("no call stack's innermost frame is a named libcudart function: %v", innermost)
			}
			cpu := byKind[events.KindCPUSample]
			interp, pyNamed := 0, 0
			for _, e := range cpu {
				if e.Args[0] != uint64(time.Second)/97 {
					t.Fatalf("CPU sample period %d ns, want %d", e.Args[0], uint64(time.Second)/97)
				}
				if slices.ContainsFunc(e.Native, func(f events.NativeFrame) bool { return f.Interp }) {
					interp++
				}
				if slices.ContainsFunc(e.Frames, func(f events.PyFrame) bool { return strings.HasSuffix(f.File, "pipeline.py") }) {
					pyNamed++
				}
			}
			// The loop runs mostly on CPU (the stand-in GPU is a thread
			// of the process): one sample each 1/97 s of its CPU time,
			// less the up to 0.3 s it ran before the attach; half of that
			// at least, as the machine's load moves how much CPU it took.
			cmd.Wait()
			used := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			want := max(10, int((used.Seconds()-0.3)*97/2))
			t.Logf("%d CPU samples over %v of the target's CPU", len(cpu), used)
			if len(cpu) < want || pyNamed < len(cpu)/2 || interp == 0 {
				t.Errorf("%d CPU samples (want %d or more: %v of CPU), %d naming pipeline.py, %d with interpreter frames",
					len(cpu), want, used, pyNamed, interp)
			}
			if st := s.Stats(); st.StacksLost != 0 {
				t.Errorf("%d stack samples lost", st.StacksLost)
			}
		})
	}
}
