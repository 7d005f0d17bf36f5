package correlate

import (
	"testing"

	"github.com/gpuprof/gpuprof/events"
)

func TestClassifyWaits(t *testing.T) {
	fr := func(pairs ...string) []events.PyFrame {
		var out []events.PyFrame
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, events.PyFrame{Func: pairs[i], File: pairs[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		frames []events.PyFrame
		kind   WaitKind
		what   string
	}{
		{fr("Condition.wait", "/usr/lib/python3.12/threading.py", "Queue.get", "/usr/lib/python3.12/queue.py", "train", "train.py"), WaitDispatch, "queue.Queue.get"},
		// 3.10 has no qualified names.
		{fr("wait", "/x/lib/python3.10/threading.py", "get", "/x/lib/python3.10/queue.py", "train", "train.py"), WaitDispatch, "queue.Queue.get"},
		{fr("Condition.wait", "threading.py", "Event.wait", "threading.py", "loop", "t.py"), WaitDispatch, "threading.Condition.wait"},
		{fr("Queue.get", "/usr/lib/python3.12/multiprocessing/queues.py", "f", "t.py"), WaitDispatch, "multiprocessing.Queue.get"},
		{fr("Queue.get", "/site-packages/ray/util/queue.py", "f", "t.py"), WaitDispatch, "ray.util.queue.Queue.get"},
		{fr("Condition.wait", "threading.py", "Future.result", "/usr/lib/python3.12/concurrent/futures/_base.py", "f", "t.py"), WaitDispatch, "concurrent.futures.result"},
		{fr("Condition.wait", "threading.py", "Queue.get", "queue.py", "_MultiProcessingDataLoaderIter._try_get_data", "/site-packages/torch/utils/data/dataloader.py"), WaitData, "DataLoader (dataloader.py:_MultiProcessingDataLoaderIter._try_get_data)"},
		{fr("Store.take", "spec_pipeline.py"), WaitLock, "lock in spec_pipeline.py:Store.take"},
		{nil, WaitLock, "lock"},
	} {
		kind, what := classify(tc.frames)
		if kind != tc.kind || what != tc.what {
			t.Errorf("classify(%v) = %s %q, want %s %q", tc.frames, kind, what, tc.kind, tc.what)
		}
	}
}
