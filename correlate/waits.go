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
)

func (k WaitKind) String() string { return [...]string{"dispatch", "data", "lock"}[k] }

// classify reads a wait's frames, innermost first, and names what waited:
// the blocking call ("queue.Queue.get") and the first caller outside the
// standard library's synchronisation code.
func classify(frames []events.PyFrame) (WaitKind, string) {
	for _, f := range frames {
		if strings.Contains(f.File, "torch/utils/data/") {
			return WaitData, "DataLoader (" + shortFunc(f) + ")"
		}
	}
	for _, f := range frames {
		if call, ok := blockingCall(f); ok {
			return WaitDispatch, call
		}
	}
	// Waiting on a threading primitive (an event, a condition, a join) is
	// waiting for another thread's work too.
	for _, f := range frames {
		if path.Base(f.File) == "threading.py" {
			return WaitDispatch, "threading." + f.Func
		}
	}
	if len(frames) > 0 {
		return WaitLock, "lock in " + shortFunc(frames[0])
	}
	return WaitLock, "lock"
}

// blockingCall recognises the library functions a thread waits in for
// something to arrive.
func blockingCall(f events.PyFrame) (string, bool) {
	fn := f.Func[strings.LastIndexByte(f.Func, '.')+1:]
	file := f.File
	switch {
	case strings.HasSuffix(file, "multiprocessing/queues.py") && fn == "get":
		return "multiprocessing.Queue.get", true
	case strings.HasSuffix(file, "ray/util/queue.py") && fn == "get":
		return "ray.util.queue.Queue.get", true
	case path.Base(file) == "queue.py" && (fn == "get" || fn == "join"):
		return "queue.Queue." + fn, true
	case strings.HasSuffix(file, "concurrent/futures/_base.py") && (fn == "result" || fn == "wait" || fn == "as_completed"):
		return "concurrent.futures." + fn, true
	}
	return "", false
}

func shortFunc(f events.PyFrame) string {
	return path.Base(f.File) + ":" + f.Func
}
