package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
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

// TestLossSummary stalls gpuprof's ring buffer reader for 3 s
// (GPUPROF_TEST_STALL_READER) while a hitloop makes 1,000,000 event
// records beside the demo trainer: the ring buffer fills and the demo's
// events are lost with the hitloop's. The summary must say how many
// events of which kind were lost, when, and which of the demo's steps
// overlapped the loss, and those steps, and only those, carry
// lost_events in --jsonl; the step that swallowed the lost boundaries (a
// merged step, the longest) is among them.
func TestLossSummary(t *testing.T) {
	testenv.RequireRoot(t)
	const calls, chunk = 1000000, 100000
	demo := testenv.StartDemo(t, "--steps", "700", "--data-ms", "5", "--compute-ms", "5")
	loop := startRecordLoop(t)
	steps := filepath.Join(t.TempDir(), "steps.jsonl")
	cmd := exec.Command(gpuprofBin, "attach", "-p", itoa(demo.PID()), "-p", itoa(loop.cmd.Process.Pid), "--no-nvml", "--jsonl", steps)
	cmd.Env = append(os.Environ(), "GPUPROF_TEST_STALL_READER=3s")
	var out bytes.Buffer
	cmd.Stdout = &out
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	var errLog bytes.Buffer
	attached := make(chan struct{})
	go waitAttached(stderr, &errLog, loop.cmd.Process.Pid, attached)
	select {
	case <-attached:
	case <-time.After(30 * time.Second):
		t.Fatal("gpuprof did not attach to the hitloop within 30 s")
	}
	start := time.Now()
	for made := 0; made < calls; made += chunk {
		loop.call(t, chunk)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Logf("the calls took %v, near the 3 s stall: fewer are lost", d)
	}
	loop.in.Close()
	demo.Wait(t, 60*time.Second)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("gpuprof: %v\n%s", err, errLog.String())
	}
	summary := out.String()
	m := regexp.MustCompile(`events lost: (\d+) of (\d+) \(the ring buffer was full[^\n]*CUDA calls (\d+)`).FindStringSubmatch(summary)
	if m == nil {
		t.Fatalf("no events lost line naming the CUDA calls lost:\n%s", summary)
	}
	lostCalls, _ := strconv.Atoi(m[3])
	if !regexp.MustCompile(`\n  lost in: \d\d:\d\d:\d\d\.\d{3}-\d\d:\d\d:\d\d\.\d{3} \(\d+\)`).MatchString(summary) {
		t.Errorf("no span of time the loss covered:\n%s", summary)
	}
	sm := regexp.MustCompile(`steps overlapping a loss, their numbers incomplete \(lost_events in --jsonl\): PID ` +
		itoa(demo.PID()) + ` steps (\d+)-(\d+) \((\d+) marked\)`).FindStringSubmatch(summary)
	if sm == nil {
		t.Fatalf("the summary names none of the demo's steps as overlapping the loss:\n%s", summary)
	}
	first, _ := strconv.Atoi(sm[1])
	last, _ := strconv.Atoi(sm[2])
	n, _ := strconv.Atoi(sm[3])

	// The hitloop's calls received and the calls lost (the demo's among
	// them) hold at least every call it made (probes.TestFloodAccounting
	// holds the count exact).
	got := hitloopCalls(t, summary, loop.cmd.Process.Pid)
	if got > calls || got+lostCalls < calls {
		t.Errorf("hitloop: %d calls received, %d calls lost in all, want %d made accounted for", got, lostCalls, calls)
	}

	rows := readSteps(t, steps)
	var marked []int
	var walls []float64
	for _, r := range rows {
		walls = append(walls, r.Wall)
		if r.Lost > 0 {
			marked = append(marked, r.Step)
		}
	}
	if len(marked) != n || len(marked) == 0 || marked[0] != first || marked[len(marked)-1] != last {
		t.Errorf("steps with lost_events in --jsonl %v, the summary says %d-%d (%d)", marked, first, last, n)
	}
	// The longest step is the one the lost boundaries merged (~1.9 s of
	// 11 ms steps): a busy machine stalls the demo far less.
	longest := slices.MaxFunc(rows, func(a, b stepRow) int { return cmp.Compare(a.Wall, b.Wall) })
	slices.Sort(walls)
	if median := walls[len(walls)/2]; longest.Lost == 0 {
		t.Errorf("the longest step, %d, lasted %.3fs (median %.4fs): boundaries merged into it, yet it has no lost_events", longest.Step, longest.Wall, median)
	}
	t.Logf("%d steps, %s; marked %v", len(rows), m[0], marked)
}

// TestMaxMemoryUsage: a negative --max-memory is a usage error.
func TestMaxMemoryUsage(t *testing.T) {
	oneLine(t, gpuprof(t, "attach", "--pid", "1", "--max-memory", "-1"), 2, "--max-memory -1")
}

type stepRow struct {
	Step int     `json:"step"`
	PID  uint32  `json:"pid"`
	Wall float64 `json:"wall_time"`
	Lost uint64  `json:"lost_events"`
}

func readSteps(t *testing.T, path string) []stepRow {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows []stepRow
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		var r stepRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no steps", path)
	}
	return rows
}

// hitloopCalls is the calls column of pid's rows in the thread tables.
func hitloopCalls(t *testing.T, summary string, pid int) int {
	t.Helper()
	row := regexp.MustCompile(`(?m)^\s+` + itoa(pid) + `\s+\d+\s+\d+\s+(\d+)\s`)
	ms := row.FindAllStringSubmatch(summary, -1)
	if ms == nil {
		t.Fatalf("no thread row for PID %d:\n%s", pid, summary)
	}
	n := 0
	for _, m := range ms {
		v, _ := strconv.Atoi(m[1])
		n += v
	}
	return n
}

// waitAttached copies r to log and closes attached once gpuprof says it
// attached to pid's driver.
func waitAttached(r io.Reader, log *bytes.Buffer, pid int, attached chan struct{}) {
	want := fmt.Sprintf("PID %d: attached", pid)
	sc := bufio.NewScanner(r)
	seen := false
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if !seen && strings.Contains(sc.Text(), want) && strings.Contains(sc.Text(), "libcuda.so.1") {
			seen = true
			close(attached)
		}
	}
}

// recordLoop is testdata/bench/hitloop making cuEventRecord calls
// straight to the driver, one probed call and one event each.
type recordLoop struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startRecordLoop(t *testing.T) *recordLoop {
	t.Helper()
	dir := testenv.Fixtures(t)
	cmd := exec.Command(filepath.Join(dir, "hitloop"), dir, "cuEventRecord")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l := &recordLoop{cmd: cmd, in: in, out: bufio.NewReader(out)}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	if line, err := l.out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("hitloop: %q %v", line, err)
	}
	return l
}

func (l *recordLoop) call(t *testing.T, n int) {
	t.Helper()
	fmt.Fprintf(l.in, "%d\n", n)
	if _, err := l.out.ReadString('\n'); err != nil {
		t.Fatalf("hitloop: %v", err)
	}
}
