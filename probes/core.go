package probes

import (
	"errors"
	"io/fs"
	"math"
	"sync"
	"time"

	"github.com/gpuprof/gpuprof/bpf"
	"github.com/gpuprof/gpuprof/events"
)

// core is what the session and its controllers share: the configuration,
// the BPF objects, the targets and the one lock over them, and the
// markers waiting to join the event stream. Every controller changes the
// links of the targets it steers (a library's launch probes, its record
// probes, its twins), so they all take mu; each keeps its own state (by
// process) in its own type, under that lock.
type core struct {
	cfg    Config
	objs   *bpf.Objects
	closer *backgroundCloser

	mu      sync.Mutex
	targets map[int]*target
	drain   *drainer   // reads the ring buffer, from the first Run on (drain.go)
	marks   []heldMark // launch-probe markers and pool readings for a coming batch
}

// otherTargets are the targets still running other than pid.
func (c *core) otherTargets(pid int) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for p, t := range c.targets {
		if p != pid && !t.exited {
			out = append(out, p)
		}
	}
	return out
}

// heldMark is an event gpuprof makes itself (a marker, a pool reading),
// held until the drainer has read what the probes wrote before it.
type heldMark struct {
	ev  events.Event
	due uint64 // the drainer's empty reads from which it is due
}

// addMarksLocked holds markers until every event written before them is
// read, so that each sorts in among the events about it: the ring buffer
// read empty twice after now holds all of them. Under mu.
func (c *core) addMarksLocked(evs ...events.Event) {
	due := uint64(0)
	if c.drain != nil {
		due = c.drain.emptiedNow() + 2
	}
	for _, ev := range evs {
		c.marks = append(c.marks, heldMark{ev: ev, due: due})
	}
}

// addMarks is addMarksLocked for a caller not holding mu.
func (c *core) addMarks(evs ...events.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addMarksLocked(evs...)
}

// dueMarks moves the markers due at emptied empty reads into batch, and
// returns the earliest End of those not yet due (the events from which on
// must wait for them), MaxUint64 if none.
func (c *core) dueMarks(batch []events.Event, emptied uint64) ([]events.Event, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.marks[:0]
	cut := uint64(math.MaxUint64)
	for _, m := range c.marks {
		if m.due <= emptied {
			batch = append(batch, m.ev)
		} else {
			kept = append(kept, m)
			cut = min(cut, m.ev.End)
		}
	}
	clear(c.marks[len(kept):])
	c.marks = kept
	return batch, cut
}

// warnUnlessExited logs a failure (err) to attach to t's process as a
// warning, or, where the process is exiting, at debug level: its files
// went with it (an on phase due as the job ends), which is no concern of
// the user's. A process's root goes as its first thread exits, its pidfd
// reads as exited once the last has: the wait spans that, and only a
// file gone is waited on (the event loop calls this).
func (c *core) warnUnlessExited(t *target, msg string, err error, args ...any) {
	args = append(args, "err", err)
	if errors.Is(err, fs.ErrNotExist) && exitedWithin(t, exitingFor) {
		c.cfg.Log.Debug(msg+": the process has exited", args...)
		return
	}
	c.cfg.Log.Warn(msg, args...)
}

// exitingFor bounds warnUnlessExited's wait: a failure path only.
const exitingFor = 200 * time.Millisecond
