package correlate

import (
	"path"
	"strings"

	"github.com/gpuprof/gpuprof/events"
)

// WaitKind says what a blocked Python thread was waiting for.
type WaitKind uint8

const (
	// WaitDispatch: for work to arrive (a queue get, an event, a future):
	// seen from the training loop, samples that do not exist yet.
	WaitDispatch WaitKind = iota
	// WaitData: for DataLoader workers: data loading.
	WaitData
	// WaitLock: for a plain lock another thread holds.
	WaitLock
	// WaitIO: in poll or select on descriptors no known queue owns.
	WaitIO
	// WaitFull: for room in a full queue (a put that blocks): seen from an
	// inference engine, the trainer is not taking samples fast enough.
	WaitFull
)

func (k WaitKind) String() string { return [...]string{"dispatch", "data", "lock", "io", "full"}[k] }

// ClassifyWait is what a Python wait (KindPyWait) waited for, by its
// frames and the libc function it blocked in alone: the wait profile's
// label. The correlator may know more of a get in a step (a whole get
// that found its sample there is the step's data, gets.go), which its
// steps' sums and phases hold and this does not.
func ClassifyWait(e *events.Event) WaitKind {
	k, _, _ := classifyWait(e)
	return k
}

// DescribeWait is ClassifyWait with what waited, as the summary's table of
// waits names it: the blocking call and its first caller outside the
// standard library ("queue.Queue.get (train.py:loop)").
func DescribeWait(e *events.Event) (WaitKind, string) {
	k, what, _ := classifyWait(e)
	return k, what
}

// classifyWait names what a Python wait event waited for: sleeps by the
// libc function they blocked in, the rest by their frames. For a queue's
// get or put it also returns the queue object's address (0 if unknown).
func classifyWait(e *events.Event) (WaitKind, string, uint64) {
	if isSleep(e) {
		// A loop that sleeps until samples exist waits for them all the
		// same (AngelSpec's controller polls the pool every 10 ms).
		where := ""
		if len(e.Frames) > 0 {
			where = " in " + shortFunc(e.Frames[0])
		}
		for _, f := range e.Frames {
			if strings.Contains(f.File, "torch/utils/data/") {
				return WaitData, "time.sleep" + where, 0
			}
		}
		return WaitDispatch, "time.sleep" + where, 0
	}
	kind, what, queue := classify(e.Frames)
	if kind == WaitLock && (e.Name == "poll" || e.Name == "ppoll" || e.Name == "select" || e.Name == "pselect" || e.Name == "read" || e.Name == "recvmsg") {
		kind, what = WaitIO, e.Name+strings.TrimPrefix(what, "lock")
	}
	return kind, what, queue
}

// isSleep says whether a Python wait is a sleep: the libc function it
// blocked in (a select on no descriptors is Python 3.10's time.sleep).
func isSleep(e *events.Event) bool {
	return e.Name == "clock_nanosleep" || e.Name == "nanosleep" ||
		(e.Name == "select" || e.Name == "pselect") && e.Args[0] == 0
}

// classify reads a wait's frames, innermost first, and names what waited:
// the blocking call ("queue.Queue.get") and the first caller outside the
// standard library's synchronisation code.
func classify(frames []events.PyFrame) (WaitKind, string, uint64) {
	for _, f := range frames {
		if strings.HasSuffix(f.Func, "_feed") && strings.HasSuffix(f.File, "multiprocessing/queues.py") {
			// A multiprocessing queue's feeder thread, idle until something
			// is put: the putting process's background, nobody's wait.
			return WaitIO, "multiprocessing.Queue feeder thread, idle", 0
		}
		if f.PinMemoryLoop() {
			// It moves batches from the workers' results into the
			// loader's queue: its gets say nothing of the step's pool.
			return WaitData, "DataLoader (pin-memory thread)", 0
		}
		if strings.Contains(f.File, "torch/utils/data/") {
			// Its queue (the workers' results, or the pinned batches) is
			// the pool of batches ready.
			var queue uint64
			for _, q := range frames {
				if c, _, ok := blockingCall(q); ok && strings.Contains(c, "Queue.get") {
					queue = q.Self
				}
			}
			return WaitData, "DataLoader (" + shortFunc(f) + ")", queue
		}
	}
	// The outermost known call is the one that says the most: a
	// multiprocessing queue's get waits in its connection's wait.
	call, kind, queue := "", WaitDispatch, uint64(0)
	for _, f := range frames {
		if c, k, ok := blockingCall(f); ok {
			call, kind, queue = c, k, 0
			if strings.Contains(c, "Queue.") {
				queue = f.Self
			}
		}
	}
	if call != "" {
		return kind, call, queue
	}
	// Waiting on a threading primitive (an event, a condition, a join) is
	// waiting for another thread's work too.
	for _, f := range frames {
		if path.Base(f.File) == "threading.py" {
			return WaitDispatch, "threading." + f.Func, 0
		}
	}
	if len(frames) > 0 {
		return WaitLock, "lock in " + shortFunc(frames[0]), 0
	}
	return WaitLock, "lock", 0
}

// sharedTensorWait names a get waiting for its sender to pass a shared
// tensor's descriptor (see blockingCall).
const sharedTensorWait = "multiprocessing.resource_sharer (a shared tensor from its sender)"

// blockingCall recognises the library functions a thread waits in for
// something to arrive, or for room to put something.
func blockingCall(f events.PyFrame) (string, WaitKind, bool) {
	fn := f.Func[strings.LastIndexByte(f.Func, '.')+1:]
	file := f.File
	queue := ""
	switch {
	case strings.HasSuffix(file, "multiprocessing/queues.py"):
		queue = "multiprocessing.Queue."
	case strings.HasSuffix(file, "ray/util/queue.py"):
		queue = "ray.util.queue.Queue."
	case path.Base(file) == "queue.py":
		queue = "queue.Queue."
	}
	switch {
	case queue != "" && fn == "put":
		return queue + fn, WaitFull, true
	case queue != "" && (fn == "get" || fn == "join" && queue == "queue.Queue."):
		return queue + fn, WaitDispatch, true
	case strings.HasSuffix(file, "concurrent/futures/_base.py") && (fn == "result" || fn == "wait" || fn == "as_completed"):
		return "concurrent.futures." + fn, WaitDispatch, true
	case strings.HasSuffix(file, "multiprocessing/connection.py") && (fn == "recv" || fn == "recv_bytes" || fn == "wait"):
		return "multiprocessing.connection." + fn, WaitDispatch, true
	case strings.HasSuffix(file, "multiprocessing/resource_sharer.py") && fn == "detach":
		// A tensor taken from a multiprocessing queue (torch's
		// file_descriptor sharing) is rebuilt from a descriptor its
		// sender passes on request: the get waits for the sender.
		return sharedTensorWait, WaitDispatch, true
	}
	return "", 0, false
}

func shortFunc(f events.PyFrame) string {
	return path.Base(f.File) + ":" + f.Func
}
