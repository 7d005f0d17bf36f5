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
	pid, minor, addrs := queuesIn(t, 3)
	addr := addrs[0]

	inBPF := map[uint32]uint64{}
	w := newPoolWatch(func(p uint32, word bpfPool) error { inBPF[p] = word.addr; return nil })
	noteGet(w, pid, pid, minor, addr)

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

// A queue that is not its process's pool, once the step thread is known,
// is read once a poolRecheck: no step's pool comes from it. Before that
// every queue is read each PoolInterval, as the pool is not known yet.
func TestPoolOtherQueuesReadOnceARecheck(t *testing.T) {
	pid, minor, addrs := queuesIn(t, 3, 5)
	pool, other := addrs[0], addrs[1]
	w := newPoolWatch(nil)
	noteGet(w, pid, pid, minor, pool)    // the step thread's
	noteGet(w, pid, pid+1, minor, other) // another thread's, last
	now := time.Now()
	if got := lengthsRead(w.read(now)); got[pool] != 3 || got[other] != 5 || len(got) != 2 {
		t.Fatalf("first reading: %v, want both queues (3 and 5)", got)
	}
	at := now.Add(poolResend)
	if got := lengthsRead(w.read(at)); len(got) != 2 {
		t.Fatalf("step thread unknown, %v in: %v, want both queues read again", at.Sub(now), got)
	}
	w.setStepThread(pid, uint32(pid))
	for at = at.Add(poolResend); at.Sub(now) < poolResend+poolRecheck; at = at.Add(poolResend) {
		got := lengthsRead(w.read(at))
		if _, ok := got[other]; ok {
			t.Fatalf("%v in, the step thread's pool known: the other queue read again within %v", at.Sub(now), poolRecheck)
		}
		if got[pool] != 3 {
			t.Fatalf("%v in: the pool not read (%v)", at.Sub(now), got)
		}
	}
	if got := lengthsRead(w.read(now.Add(poolResend + poolRecheck))); got[other] != 5 {
		t.Fatalf("after poolRecheck: %v, want the other queue read once more", got)
	}
}

// queuesIn starts a Python process holding queue.Queues of the given
// lengths and returns its PID, CPython minor and the queues' addresses.
func queuesIn(t *testing.T, lengths ...int) (pid, minor int, addrs []uint64) {
	t.Helper()
	testenv.RequireRoot(t) // process_vm_readv of another process
	var python string
	for _, p := range testenv.Pythons(t) {
		python = p
		break
	}
	cmd := exec.Command(python, "-c", `import queue, sys
qs = [queue.Queue() for _ in sys.argv[1:]]
for q, n in zip(qs, sys.argv[1:]):
    for i in range(int(n)): q.put(i)
print(sys.version_info.minor, *map(id, qs), flush=True)
sys.stdin.read()`)
	for _, n := range lengths {
		cmd.Args = append(cmd.Args, strconv.Itoa(n))
	}
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
	f := strings.Fields(line)
	if len(f) != 1+len(lengths) {
		t.Fatalf("python printed %q, want the minor and %d addresses", line, len(lengths))
	}
	minor, _ = strconv.Atoi(f[0])
	for _, a := range f[1:] {
		addr, _ := strconv.ParseUint(a, 10, 64)
		addrs = append(addrs, addr)
	}
	return cmd.Process.Pid, minor, addrs
}

// noteGet tells w that thread tid of pid waited in a get of the queue at addr.
func noteGet(w *poolWatch, pid, tid, minor int, addr uint64) {
	w.note(&events.Event{Kind: events.KindPyWait, PID: uint32(pid), TID: uint32(tid),
		Frames: []events.PyFrame{{Func: "Queue.get", File: "/usr/lib/python3/queue.py", Self: addr}}}, minor)
}

// lengthsRead are the queues' lengths in a reading's events, by address.
func lengthsRead(evs []events.Event) map[uint64]uint64 {
	m := map[uint64]uint64{}
	for _, e := range evs {
		m[e.Args[1]] = e.Args[0]
	}
	return m
}

// A CPU-only process's queues (its wait probes thinned: no steps to come)
// are read once a poolRecheck, before and after its first reading alike.
func TestPoolOfAStepLessProcessReadOnceARecheck(t *testing.T) {
	pid, minor, addrs := queuesIn(t, 7)
	w := newPoolWatch(nil)
	stepless := false
	w.stepless = func(p int) bool { return p == pid && stepless }
	noteGet(w, pid, pid, minor, addrs[0])
	now := time.Now()
	if got := lengthsRead(w.read(now)); got[addrs[0]] != 7 {
		t.Fatalf("first reading: %v, want 7", got)
	}
	if got := lengthsRead(w.read(now.Add(poolResend))); got[addrs[0]] != 7 {
		t.Fatalf("a process not (yet) known step-less: %v, want its queue read each time", got)
	}
	stepless = true
	for at := now.Add(2 * poolResend); at.Sub(now) < poolResend+poolRecheck; at = at.Add(poolResend) {
		if got := lengthsRead(w.read(at)); len(got) != 0 {
			t.Fatalf("%v in, step-less: read again within %v (%v)", at.Sub(now), poolRecheck, got)
		}
	}
	if got := lengthsRead(w.read(now.Add(poolResend + poolRecheck))); got[addrs[0]] != 7 {
		t.Fatalf("after poolRecheck: %v, want the queue read once more", got)
	}
}
