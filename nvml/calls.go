package nvml

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

var (
	// errStuck: an earlier call has not returned, so this one was not made.
	errStuck = errors.New("NVML is not answering: an earlier call has not returned")
	// errTimedOut: this call did not return in time; it was logged.
	errTimedOut = errors.New("NVML call did not return in time")
	errClosed   = errors.New("NVML sampler closed")
)

// caller runs NVML calls one at a time on a goroutine of its own and waits
// for each at most a bound. A call that hangs (a GPU wedged in the driver, a
// driver upgrade half done) then costs the sampler one timeout, not its
// whole future: while the call is still in flight, later calls are refused
// at once (errStuck) instead of queueing behind it or each starting a
// goroutine that would hang too; when it returns, calls go on.
type caller struct {
	log  *slog.Logger
	jobs chan func() nvml.Return

	// mu makes callers take turns; it also guards timer and closed.
	mu     sync.Mutex
	timer  *time.Timer
	closed bool

	// state guards what the worker and a timed-out caller both touch: the
	// worker reports a finished call on done only while it is awaited.
	state     sync.Mutex
	done      chan struct{} // capacity 1
	ret       nvml.Return
	abandoned bool // the call in flight timed out
	stuckCall string
	stuckGPU  int
	stuckAt   time.Time
}

func newCaller(log *slog.Logger) *caller {
	t := time.NewTimer(time.Hour)
	t.Stop()
	c := &caller{log: log, jobs: make(chan func() nvml.Return), done: make(chan struct{}, 1), timer: t}
	go c.work()
	return c
}

func (c *caller) work() {
	for call := range c.jobs {
		ret := call()
		c.state.Lock()
		if c.abandoned {
			c.abandoned = false
			name, gpu, at := c.stuckCall, c.stuckGPU, c.stuckAt
			c.state.Unlock()
			c.log.Info("NVML call returned at last; sampling resumes",
				"call", name, "gpu", gpu, "after", time.Since(at).Round(time.Millisecond))
			continue
		}
		c.ret = ret
		c.done <- struct{}{}
		c.state.Unlock()
	}
}

// do runs call, named name (an NVML function) on GPU gpu (-1: none), and
// returns its result, or errStuck, errTimedOut or errClosed where it has none.
func (c *caller) do(name string, gpu int, timeout time.Duration, call func() nvml.Return) (nvml.Return, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nvml.ERROR_UNKNOWN, errClosed
	}
	if c.stuck() {
		return nvml.ERROR_UNKNOWN, errStuck
	}
	c.jobs <- call
	c.timer.Reset(timeout)
	select {
	case <-c.done:
		c.timer.Stop()
		return c.ret, nil
	case <-c.timer.C:
	}
	c.state.Lock()
	select {
	case <-c.done: // it returned as the timer fired
		c.state.Unlock()
		return c.ret, nil
	default:
	}
	c.abandoned, c.stuckCall, c.stuckGPU, c.stuckAt = true, name, gpu, time.Now()
	c.state.Unlock()
	c.log.Warn("NVML call did not return in time: leaving NVML alone until it does",
		"call", name, "gpu", gpu, "timeout", timeout)
	return nvml.ERROR_UNKNOWN, errTimedOut
}

// stuck says whether a call that timed out is still in flight.
func (c *caller) stuck() bool {
	c.state.Lock()
	defer c.state.Unlock()
	return c.abandoned
}

// close ends the worker once the call in flight, if any, returns.
func (c *caller) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.jobs)
	}
}
