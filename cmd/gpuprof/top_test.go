package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

// TestTopInTmux runs gpuprof top on the demo trainer in a tmux pane (a
// real terminal: tcell, the alternate screen, resize and keys), on fake
// GPUs for its GPU table:
//   - the screen shows the last steps in order, a phase bar and the GPU;
//   - resized to 70x20 it lays itself out again for 70 columns: the
//     steps table's wide columns gone;
//   - q leaves the screen, and the usual summary follows, its
//     bottleneck line, and gpuprof exits 0.
func TestTopInTmux(t *testing.T) {
	testenv.RequireRoot(t)
	tmuxBin, err := exec.LookPath("tmux")
	if err != nil {
		testenv.Skip(t, "needs tmux (apt-get install tmux)")
	}
	began := time.Now()
	demo := testenv.StartDemo(t, "--steps", "1000000")
	// A private server, its socket in the test's directory (removed with
	// it), with no configuration of the machine's.
	const name = "gpuprof-top"
	socket := filepath.Join(t.TempDir(), "tmux")
	tmux := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(tmuxBin, append([]string{"-S", socket, "-f", "/dev/null"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	t.Cleanup(func() { exec.Command(tmuxBin, "-S", socket, "kill-server").Run() })
	pid := itoa(demo.PID())
	tmux("new-session", "-d", "-s", name, "-x", "120", "-y", "40",
		fmt.Sprintf("env GPUPROF_FAKE_NVML_PIDS=%s %s top --pid %s; echo EXITED $?; sleep 30", pid, fakeNVMLBin, pid))
	pane := func() []string {
		return strings.Split(strings.TrimRight(tmux("capture-pane", "-p", "-t", name), "\n"), "\n")
	}
	// waitPane polls the pane until ok accepts it: generous, for a
	// loaded machine of two CPUs.
	waitPane := func(what string, ok func([]string) bool) []string {
		t.Helper()
		var lines []string
		for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if lines = pane(); ok(lines) {
				return lines
			}
		}
		t.Fatalf("the pane did not show %s in 90 s:\n%s", what, strings.Join(lines, "\n"))
		return nil
	}

	lines := waitPane("5 steps in the steps table", func(l []string) bool { return len(tableSteps(l)) >= 5 })
	steps := tableSteps(lines)
	for i := 1; i < len(steps); i++ {
		if steps[i] <= steps[i-1] {
			t.Errorf("steps table rows %v: want increasing step numbers", steps)
			break
		}
	}
	if !strings.HasPrefix(lines[0], "gpuprof top  PID "+pid+"  attached ") || !strings.HasSuffix(lines[0], "q quits") {
		t.Errorf("header %q", lines[0])
	}
	phaseBar := regexp.MustCompile(`^  \[[WDCS.]{20,}\]$`)
	if !slices.ContainsFunc(lines, phaseBar.MatchString) {
		t.Errorf("no phase bar:\n%s", strings.Join(lines, "\n"))
	}
	for _, want := range []string{"bottleneck: ", "PHASES of the latest step", "dispatch_wait", "launches", "GPUS (NVML", "software power cap"} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, want) }) {
			t.Errorf("120x40: no %q:\n%s", want, strings.Join(lines, "\n"))
		}
	}

	tmux("resize-window", "-t", name, "-x", "70", "-y", "20")
	// Laid out again, not cut: the 120-column table cut at 70 would
	// still show dispatch_wait.
	narrow := func(l []string) bool {
		i := slices.IndexFunc(l, func(l string) bool { return strings.HasPrefix(l, "LAST STEPS") })
		return i >= 0 && i+1 < len(l) && strings.Contains(l[i+1], "step_time") && !strings.Contains(l[i+1], "dispatch_wait")
	}
	lines = waitPane("the 70-column layout", func(l []string) bool {
		return strings.HasPrefix(l[0], "gpuprof top  PID "+pid) && narrow(l) && len(tableSteps(l)) > 0
	})
	for i, l := range lines {
		if n := len([]rune(l)); n > 70 {
			t.Errorf("row %d is %d wide: %q", i, n, l)
		}
	}
	cols := strings.Fields(lines[slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "LAST STEPS") })+1])
	if slices.Contains(cols, "launches") || slices.Contains(cols, "dispatch_wait") || !slices.Contains(cols, "step_time") {
		t.Errorf("70 columns: steps table columns %v, want the narrow ones", cols)
	}

	tmux("send-keys", "-t", name, "q")
	waitPane("EXITED", func(l []string) bool {
		return slices.ContainsFunc(l, func(l string) bool { return strings.HasPrefix(l, "EXITED") })
	})
	// The whole history: the summary is longer than the pane.
	all := tmux("capture-pane", "-p", "-J", "-S", "-", "-t", name)
	if !strings.Contains(all, "EXITED 0") {
		t.Errorf("gpuprof top did not exit 0:\n%s", all)
	}
	if !regexp.MustCompile(`(?m)^bottleneck: \S`).MatchString(all) || !strings.Contains(all, "step boundary") {
		t.Errorf("no summary after the screen:\n%s", all)
	}
	if strings.Contains(all, "gpuprof top  PID") {
		t.Errorf("the screen is still there after q (the alternate screen was not left):\n%s", all)
	}
	t.Logf("TestTopInTmux: %v", time.Since(began).Round(100*time.Millisecond))
}

// tableSteps are the step numbers of the steps table's rows in a pane.
func tableSteps(lines []string) []int {
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "LAST STEPS") })
	if i < 0 || i+1 >= len(lines) {
		return nil
	}
	var steps []int
	for _, l := range lines[i+2:] {
		f := strings.Fields(l)
		if len(f) == 0 {
			break
		}
		n, err := strconv.Atoi(f[0])
		if err != nil {
			break
		}
		steps = append(steps, n)
	}
	return steps
}

// TestTopWithoutTerminal: with stdout a pipe, top says once on stderr
// that it shows the live line instead, and is attach.
func TestTopWithoutTerminal(t *testing.T) {
	oneLine(t, gpuprof(t, "top"), 2, "top needs --pid")
	oneLine(t, gpuprof(t, "top", "--pid", "1", "extra"), 2, "gpuprof run")
	const note = "gpuprof top: stdout is not a terminal: showing the live line instead, as gpuprof attach does\n"
	sleep := startSleep(t)
	top := func() result {
		t.Helper()
		r := gpuprof(t, "top", "--pid", itoa(sleep.Process.Pid), "-d", "1s")
		if !strings.HasPrefix(r.stderr, note) || strings.Count(r.stderr, note) != 1 {
			t.Errorf("stderr %q: want it to begin with the note, once", r.stderr)
		}
		return r
	}
	if os.Geteuid() != 0 {
		// The note comes before attach's check of privileges.
		if r := top(); r.code != 1 || !strings.Contains(r.stderr, "sudo") {
			t.Errorf("top as a user: %+v", r)
		}
		return
	}
	testenv.RequireRoot(t) // as root it attaches: not under -short
	// As attach: it waits for the process to load CUDA, and says so.
	if r := top(); r.code != 0 || !strings.Contains(r.stderr, "waiting for PID "+itoa(sleep.Process.Pid)+" to load a CUDA library") {
		t.Errorf("top, no terminal: %+v", r)
	}
}

// TestTopWithoutTerminalLiveLine: on the demo trainer, with stdout a
// pipe, top prints attach's live line on stderr and its summary on
// stdout.
func TestTopWithoutTerminalLiveLine(t *testing.T) {
	testenv.RequireRoot(t)
	demo := testenv.StartDemo(t, "--steps", "1000000")
	r := gpuprof(t, "top", "--pid", itoa(demo.PID()), "-d", "4s")
	if r.code != 0 {
		t.Fatalf("top: %+v", r)
	}
	if !regexp.MustCompile(`(?m)^step \d+ \| step `).MatchString(r.stderr) {
		t.Errorf("no live line on stderr:\n%s", r.stderr)
	}
	if !regexp.MustCompile(`(?m)^bottleneck: \S`).MatchString(r.stdout) {
		t.Errorf("no summary on stdout:\n%s", r.stdout)
	}
}

// TestTopNoteWriter: while the screen is up, each line written (slog's
// records) is a note; before and after, the writes go to the writer.
func TestTopNoteWriter(t *testing.T) {
	var out strings.Builder
	var notes []string
	w := &noteWriter{w: &out}
	fmt.Fprint(w, "before\n")
	w.to(func(s string) { notes = append(notes, s) })
	fmt.Fprint(w, "level=WARN msg=one\nlevel=WARN msg=two\n")
	w.to(nil)
	fmt.Fprint(w, "after\n")
	if out.String() != "before\nafter\n" || !slices.Equal(notes, []string{"level=WARN msg=one", "level=WARN msg=two"}) {
		t.Errorf("written %q, noted %q", out.String(), notes)
	}
}
