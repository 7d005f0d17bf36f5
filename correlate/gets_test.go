package correlate

import (
	"testing"

	"github.com/gpuprof/gpuprof/events"
)

// TestWholeGetTakesItsWaitsKind: a whole get (--probe get=..., attach's
// whole multiprocessing gets) is the kind of wait the waits inside it are:
// for a sample pool, dispatch wait, the unpickling after the block
// included, and so is a later get that did not block; for a DataLoader's
// batches, data, never dispatch; on a thread whose gets never blocked,
// no wait at all, and never a step boundary.
func TestWholeGetTakesItsWaitsKind(t *testing.T) {
	const get = 0x8000
	pool := []events.PyFrame{{Func: "Connection.recv_bytes", File: "/usr/lib/python3.12/multiprocessing/connection.py"},
		{Func: "Queue.get", File: "/usr/lib/python3.12/multiprocessing/queues.py"}, {Func: "train", File: "train.py"}}
	loader := []events.PyFrame{{Func: "Connection.poll", File: "/usr/lib/python3.12/multiprocessing/connection.py"},
		{Func: "Queue.get", File: "/usr/lib/python3.12/multiprocessing/queues.py"},
		{Func: "_MultiProcessingDataLoaderIter._try_get_data", File: "/site-packages/torch/utils/data/dataloader.py"}}
	for _, tc := range []struct {
		name           string
		frames         []events.PyFrame // nil: the gets never block
		blockFrom      int              // the first step whose get blocks
		dispatch, data float64          // per step (after the first blocking get)
	}{
		{"pool", pool, 3, 4e-3 + 70e-6, 0},
		{"dataloader", loader, 3, 0, 4e-3 + 70e-6},
		{"never blocks", nil, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newThread(100, 101, 0)
			for i := range 40 {
				start := tr.t
				tr.idle(30 * us) // the get's Python before it blocks
				blocks := tc.frames != nil && i >= tc.blockFrom && i%2 == 1
				if blocks {
					tr.evs = append(tr.evs, events.Event{Kind: events.KindPyWait, PID: 100, TID: 101, Start: tr.t, End: tr.t + 4*ms,
						Frames: tc.frames})
					tr.t += 4 * ms
				}
				tr.idle(40 * us) // and after: unpickling what it got
				tr.evs = append(tr.evs, events.Event{Kind: events.KindCall, API: get, PID: 100, TID: 101, Start: start, End: tr.t})
				tr.idle(300 * us)
				tr.call(t, "cudaMemcpyAsync", 20*us, 0xa000, 0xb000, 1<<20, 1, 0)
				tr.launch(30, 10*us)
				tr.call(t, "cudaStreamSynchronize", ms, 0)
			}
			c, steps := run(t, Config{User: map[uint16]UserProbe{get: {Role: "get", Name: "multiprocessing.queues:Queue.get"}}}, tr.evs)
			if a, _ := c.Anchor(); a.Calls == "user probe" || len(steps) != 39 {
				t.Fatalf("anchor %+v, %d steps", a, len(steps))
			}
			for _, s := range steps {
				// Step k begins with iteration k+1's get.
				if int(s.Index)+1 < tc.blockFrom {
					continue // the gets before the first that blocked: no kind known yet
				}
				blocked := tc.frames != nil && s.Index%2 == 0
				dispatch, data := 70e-6, 0.0
				if tc.data > 0 {
					dispatch, data = 0, 70e-6
				}
				if blocked {
					dispatch, data = tc.dispatch, tc.data
				}
				if tc.frames == nil {
					dispatch, data = 0, 0
				}
				within(t, "dispatch_wait", s.DispatchWait, dispatch, 1e-9)
				if data > 0 && s.DataTime < data {
					t.Errorf("step %d: data_time %.6f, less than its get's %.6f", s.Index, s.DataTime, data)
				}
			}
		})
	}
}
