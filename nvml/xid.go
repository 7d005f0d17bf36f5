package nvml

import (
	"context"
	"reflect"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuprof/gpuprof/events"
)

// xidWait bounds each wait for an event: how soon the waiter sees that it
// should stop.
const xidWait = 250 * time.Millisecond

// WatchXids hands out each Xid error a sampled GPU reports until ctx is done
// or the sampler is closed. Where no GPU can report them it returns at once,
// having logged one warning.
//
// The wait for events blocks in the driver by design, so it runs on a
// goroutine of its own, not on the sampling one; WatchXids returns at ctx's
// end without waiting for it, and the set is freed when its wait ends.
func (s *Sampler) WatchXids(ctx context.Context, out func(events.Xid)) {
	set, ok := s.registerXids()
	if !ok {
		return
	}
	found := make(chan events.Xid)
	go s.waitXids(ctx, set, found)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.stop:
			return
		case x := <-found:
			out(x)
		}
	}
}

// registerXids creates an event set and registers every live GPU that can
// report Xids in it.
func (s *Sampler) registerXids() (nvml.EventSet, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if stopped(s.stop) {
		return nil, false
	}
	t := s.cfg.CallTimeout
	var set nvml.EventSet
	if err := callErr(s.calls.do("EventSetCreate", -1, t, func() (r nvml.Return) { set, r = s.lib.EventSetCreate(); return })); err != nil {
		s.log.Warn("Xid errors not watched: no NVML event set", "err", err)
		return nil, false
	}
	var on, off []int
	var why error
	for _, g := range s.gpus {
		if g.lost {
			continue
		}
		var types uint64
		err := callErr(s.calls.do("GetSupportedEventTypes", g.info.Index, t, func() (r nvml.Return) { types, r = g.dev.GetSupportedEventTypes(); return }))
		if err == nil && types&nvml.EventTypeXidCriticalError == 0 {
			err = nvml.ERROR_NOT_SUPPORTED
		}
		if err == nil {
			err = callErr(s.calls.do("RegisterEvents", g.info.Index, t, func() nvml.Return { return g.dev.RegisterEvents(nvml.EventTypeXidCriticalError, set) }))
		}
		if err != nil {
			off, why = append(off, g.info.Index), err
			continue
		}
		on = append(on, g.info.Index)
	}
	if len(on) == 0 {
		s.calls.do("EventSetFree", -1, t, set.Free)
		s.log.Warn("Xid errors not watched: no GPU can report them", "gpus", joinInts(off), "err", why)
		return nil, false
	}
	if len(off) > 0 {
		s.log.Warn("Xid errors not watched on some GPUs", "gpus", joinInts(off), "err", why)
	}
	s.xids.Add(1) // under mu, before Close can close stop and wait
	return set, true
}

// waitXids waits for events on set and sends each Xid to found, until ctx is
// done or the sampler closes; then it frees set.
func (s *Sampler) waitXids(ctx context.Context, set nvml.EventSet, found chan<- events.Xid) {
	defer s.xids.Done()
	defer s.calls.do("EventSetFree", -1, s.cfg.CallTimeout, set.Free)
	failed := nvml.SUCCESS
	for ctx.Err() == nil && !stopped(s.stop) {
		data, ret := set.Wait(uint32(xidWait.Milliseconds()))
		switch {
		case ret == nvml.SUCCESS && data.EventType&nvml.EventTypeXidCriticalError != 0:
			x := events.Xid{TimeNS: s.cfg.Now(), GPU: s.indexOf(data.Device), Code: data.EventData}
			select {
			case found <- x:
			case <-ctx.Done():
			case <-s.stop:
			}
		case ret == nvml.SUCCESS, ret == nvml.ERROR_TIMEOUT:
		default:
			// A lost GPU makes every wait fail at once: pause rather than spin.
			if ret != failed {
				s.log.Warn("NVML event wait failed: retrying", "err", ret.Error())
				failed = ret
			}
			select {
			case <-time.After(xidWait):
			case <-ctx.Done():
			case <-s.stop:
			}
		}
	}
}

// awaitXids waits, at most a bound, for the Xid waiters to free their sets;
// it says whether they did.
func (s *Sampler) awaitXids() bool {
	done := make(chan struct{})
	go func() { s.xids.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(xidWait + 2*s.cfg.CallTimeout):
		return false
	}
}

// indexOf is the NVML index of the sampled GPU whose handle is d; -1 if none.
func (s *Sampler) indexOf(d nvml.Device) int {
	for _, g := range s.gpus {
		if sameDevice(g.dev, d) {
			return g.info.Index
		}
	}
	return -1
}

// sameDevice compares handles without the panic == gives on a handle type
// that is not comparable.
func sameDevice(a Device, b nvml.Device) bool {
	if a == nil || b == nil {
		return false
	}
	t := reflect.TypeOf(a)
	return t == reflect.TypeOf(b) && t.Comparable() && any(a) == any(b)
}

func stopped(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// callErr folds a caller.do result into one error: nil on success.
func callErr(ret nvml.Return, err error) error {
	if err != nil {
		return err
	}
	if ret != nvml.SUCCESS {
		return ret
	}
	return nil
}
