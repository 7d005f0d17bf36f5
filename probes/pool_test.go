package probes

import (
	"bufio"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/internal/testenv"
)

// A pool the BPF programs are reading is not polled: reading another
// process's memory every 10 ms slowed a data-bound job by ~4%. Its
// readings stopping brings the polling back.
func TestPoolPolledOnlyWithoutBPFReadings(t *testing.T) {
	testenv.RequireRoot(t) // process_vm_readv of another process
	var python string
	for _, p := range testenv.Pythons(t) {
		python = p
		break
	}
	cmd := exec.Command(python, "-c", `import queue, sys
q = queue.Queue()
for i in range(3): q.put(i)
print(sys.version_info.minor, id(q), flush=True)
sys.stdin.read()`)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("python printed nothing: %v", err)
	}
	var minor int
	var addr uint64
	if f := strings.Fields(line); len(f) == 2 {
		minor, _ = strconv.Atoi(f[0])
		addr, _ = strconv.ParseUint(f[1], 10, 64)
	}
	pid := cmd.Process.Pid

	inBPF := map[uint32]uint64{}
	w := newPoolWatch(func(p uint32, word bpfPool) error { inBPF[p] = word.addr; return nil })
	w.note(&events.Event{Kind: events.KindPyWait, PID: uint32(pid), TID: uint32(pid),
		Frames: []events.PyFrame{{Func: "Queue.get", File: "/usr/lib/python3/queue.py", Self: addr}}}, minor)

	now := time.Now()
	evs := w.read(now)
	if len(evs) != 1 || evs[0].Args[0] != 3 {
		t.Fatalf("first reading: %+v, want one pool event of length 3", evs)
	}
	if inBPF[uint32(pid)] == 0 {
		t.Fatal("the pool's word did not go to the BPF map")
	}

	// BPF readings arrive: no polling, and so no events, past poolResend.
	for at := now.Add(poolResend); at.Sub(now) < poolRecheck; at = at.Add(poolResend) {
		w.sawBPFReadings([]uint32{uint32(pid)}, at)
		if evs := w.read(at.Add(time.Millisecond)); len(evs) != 0 {
			t.Fatalf("%v in, with BPF readings arriving: polled %+v", at.Sub(now), evs)
		}
	}
	// Once a poolRecheck the pool is still read, to drop a freed queue.
	at := now.Add(poolRecheck + poolResend)
	w.sawBPFReadings([]uint32{uint32(pid)}, at)
	if evs := w.read(at); len(evs) != 1 {
		t.Fatalf("after poolRecheck: %d events, want the recheck's one", len(evs))
	}

	// The readings stop (the process makes no CUDA calls): polling again.
	at = at.Add(bpfFresh + poolResend)
	if evs := w.read(at); len(evs) != 1 || evs[0].Args[0] != 3 {
		t.Fatalf("BPF readings stale: %+v, want the polled length 3", evs)
	}
}
