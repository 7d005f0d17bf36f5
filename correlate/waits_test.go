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
		{fr("Condition.wait", "threading.py", "Queue._feed", "/usr/lib/python3.12/multiprocessing/queues.py", "Thread.run", "threading.py"), WaitIO, "multiprocessing.Queue feeder thread, idle"},
		{fr("wait", "threading.py", "_feed", "/x/lib/python3.10/multiprocessing/queues.py"), WaitIO, "multiprocessing.Queue feeder thread, idle"},
		{nil, WaitLock, "lock"},
	} {
		kind, what, _ := classify(tc.frames)
		if kind != tc.kind || what != tc.what {
			t.Errorf("classify(%v) = %s %q, want %s %q", tc.frames, kind, what, tc.kind, tc.what)
		}
	}
	// A DataLoader waiting on its workers' result queue: data loading,
	// and that queue (its self) is the pool of batches ready.
	dl := []events.PyFrame{{Func: "Connection.poll", File: "/usr/lib/python3.12/multiprocessing/connection.py"},
		{Func: "Queue.get", File: "/usr/lib/python3.12/multiprocessing/queues.py", Self: 0xabc0},
		{Func: "_MultiProcessingDataLoaderIter._try_get_data", File: "/site-packages/torch/utils/data/dataloader.py", Self: 0xdef0}}
	if kind, _, queue := classify(dl); kind != WaitData || queue != 0xabc0 {
		t.Errorf("DataLoader wait: %s, queue %#x; want data, 0xabc0", kind, queue)
	}
}

func TestClassifySleeps(t *testing.T) {
	caller := []events.PyFrame{{Func: "Trainer.wait_for_samples", File: "angelspec/controller.py"}}
	for _, tc := range []struct {
		name string
		arg0 uint64
		kind WaitKind
		what string
	}{
		{"clock_nanosleep", 0, WaitDispatch, "time.sleep in controller.py:Trainer.wait_for_samples"},
		{"select", 0, WaitDispatch, "time.sleep in controller.py:Trainer.wait_for_samples"}, // 3.10's sleep
		{"select", 5, WaitIO, "select in controller.py:Trainer.wait_for_samples"},           // a real select
	} {
		e := &events.Event{Kind: events.KindPyWait, Name: tc.name, Frames: caller}
		e.Args[0] = tc.arg0
		if kind, what, _ := classifyWait(e); kind != tc.kind || what != tc.what {
			t.Errorf("%s(%d): %s %q, want %s %q", tc.name, tc.arg0, kind, what, tc.kind, tc.what)
		}
	}
}
