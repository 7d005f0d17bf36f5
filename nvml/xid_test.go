package nvml

import (
	"context"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/nvml/nvmlfake"
)

func TestWatchXids(t *testing.T) {
	h := nvmlfake.NewHost()
	s, logs := newSampler(t, h, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan events.Xid, 4)
	returned := make(chan struct{})
	go func() { s.WatchXids(ctx, func(x events.Xid) { got <- x }); close(returned) }()

	h.Xids <- nvml.EventData{Device: h.Devs[5], EventType: nvml.EventTypeSingleBitEccError} // not an Xid
	h.Xids <- nvml.EventData{Device: h.Devs[5], EventType: nvml.EventTypeXidCriticalError, EventData: 79}
	h.Xids <- nvml.EventData{Device: h.Devs[0], EventType: nvml.EventTypeXidCriticalError, EventData: 13}
	for _, want := range []events.Xid{{GPU: 5, Code: 79}, {GPU: 0, Code: 13}} {
		select {
		case x := <-got:
			if x.GPU != want.GPU || x.Code != want.Code || x.TimeNS == 0 {
				t.Errorf("Xid %+v, want %+v", x, want)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("no Xid %+v", want)
		}
	}
	cancel()
	select {
	case <-returned:
	case <-time.After(100 * time.Millisecond):
		t.Errorf("WatchXids still running 100ms after ctx ended")
	}
	for i, d := range h.Devs {
		if c := d.RegisterEventsCalls(); len(c) != 1 || c[0].V != nvml.EventTypeXidCriticalError || c[0].EventSet != h.Set {
			t.Errorf("GPU %d registered %+v", i, c)
		}
	}
	if !s.awaitXids() || len(h.Set.FreeCalls()) != 1 {
		t.Errorf("event set freed %d times after the end, want once", len(h.Set.FreeCalls()))
	}
	if w := logs.lines("WARN"); len(w) != 0 {
		t.Errorf("warnings: %q", w)
	}
}

// TestWatchXidsUnsupported: without Xid events it returns at once, warning once.
func TestWatchXidsUnsupported(t *testing.T) {
	h := nvmlfake.NewHost()
	for _, d := range h.Devs {
		d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return nvml.EventTypeSingleBitEccError, nvml.SUCCESS }
	}
	h.Devs[6].GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	s, logs := newSampler(t, h, Config{})
	start := time.Now()
	s.WatchXids(context.Background(), func(x events.Xid) { t.Errorf("Xid %+v", x) })
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Errorf("WatchXids took %v where unsupported", d)
	}
	if w := logs.lines("WARN", "Xid errors not watched", "gpus=0,1,2,3,4,5,6,7"); len(w) != 1 || len(logs.lines("WARN")) != 1 {
		t.Errorf("warnings:\n%s", logs)
	}
	if len(h.Set.FreeCalls()) != 1 || len(h.Devs[0].RegisterEventsCalls()) != 0 {
		t.Errorf("event set freed %d times, registered %d", len(h.Set.FreeCalls()), len(h.Devs[0].RegisterEventsCalls()))
	}
}

// TestWatchXidsEndsOnClose: Close ends the watch, then shuts NVML down.
func TestWatchXidsEndsOnClose(t *testing.T) {
	h := nvmlfake.NewHost()
	h.Devs[2].RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.ERROR_NO_PERMISSION }
	s, logs := newSampler(t, h, Config{})
	returned := make(chan struct{})
	go func() { s.WatchXids(context.Background(), func(events.Xid) {}); close(returned) }()
	for len(h.Set.WaitCalls()) == 0 {
		time.Sleep(time.Millisecond)
	}
	s.Close()
	<-returned
	if len(h.Set.FreeCalls()) != 1 || len(h.Srv.ShutdownCalls()) != 1 {
		t.Errorf("set freed %d times, Shutdown %d", len(h.Set.FreeCalls()), len(h.Srv.ShutdownCalls()))
	}
	if w := logs.lines("WARN", "not watched on some GPUs", "gpus=2 ", "ERROR_NO_PERMISSION"); len(w) != 1 {
		t.Errorf("warnings:\n%s", logs)
	}
}
