package probes

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/gpuprof/gpuprof/events"
)

// drainer reads the ring buffer on a goroutine of its own and holds the
// decoded events until the event loop takes them. The loop stops for
// whatever the kernel makes it wait on (closing a link as twins settle or
// launch counting pauses, attaching to a library just loaded): on the
// H200 host a DDP job's ~20,000 events a second filled the 4 MiB buffer
// in ~1.5 s while eight twin decisions held the loop ~5 s, and 3% of the
// events were lost, with 17 steps merged into one. Held here, the events
// only wait.
type drainer struct {
	rd   *ringbuf.Reader
	poll time.Duration
	// max is how many events are held before reading stops: past it the
	// ring buffer fills and the BPF programs count what is lost, as
	// before, rather than gpuprof's memory growing without end.
	max int

	mu      sync.Mutex
	space   *sync.Cond // signalled as the loop takes the held events
	held    []events.Event
	libLoad bool  // a library load among the held events: rescan now
	err     error // what ended reading
	stopped bool
	// emptied counts the reads that found the ring buffer empty: the loop
	// waits for two more to know that what was written before is held.
	emptied uint64

	ready chan struct{} // cap 1: events held, or reading ended
	done  chan struct{} // closed when the goroutine returns
	bad   atomic.Uint64 // records that could not be decoded
}

// heldMax bounds the events held: ~13 s of the DDP job's rate, ~50 MB.
const heldMax = 1 << 18

// newDrainer starts reading rd; stall delays the first read (testStall).
func newDrainer(rd *ringbuf.Reader, poll time.Duration, max int, stall time.Duration) *drainer {
	d := &drainer{rd: rd, poll: poll, max: max, ready: make(chan struct{}, 1), done: make(chan struct{})}
	d.space = sync.NewCond(&d.mu)
	go d.run(stall)
	return d
}

// stallEnv names a duration for which the events drainer does not read
// at first, so that the ring buffer fills as behind a stalled reader and
// the loss accounting can be tested end to end (TestFloodAccounting,
// TestLossSummary): nothing else fills a 4 MiB ring buffer on purpose.
// Read here only; unset, or not a duration, there is no stall.
const stallEnv = "GPUPROF_TEST_STALL_READER"

// testStall is stallEnv's duration, 0 without one.
func testStall() time.Duration {
	d, err := time.ParseDuration(os.Getenv(stallEnv))
	if err != nil || d < 0 {
		return 0
	}
	return d
}

func (d *drainer) run(stall time.Duration) {
	defer close(d.done)
	if stall > 0 {
		d.mu.Lock()
		for end := time.Now().Add(stall); time.Now().Before(end) && !d.stopped; {
			d.mu.Unlock()
			time.Sleep(min(time.Until(end), 10*time.Millisecond))
			d.mu.Lock()
		}
		d.mu.Unlock()
	}
	var rec ringbuf.Record
	var buf []events.Event
	libLoad := false
	last := time.Now()
	for {
		d.rd.SetDeadline(time.Now().Add(d.poll))
		err := d.rd.ReadInto(&rec)
		empty := errors.Is(err, os.ErrDeadlineExceeded)
		switch {
		case empty:
		case err != nil: // the reader closed (Session.Close), or worse: Run returns it
			d.hand(buf, libLoad, false, err)
			return
		default:
			var ev events.Event
			if err := decodeRecord(rec.RawSample, &ev); err != nil {
				d.bad.Add(1)
				continue
			}
			buf = append(buf, ev)
			libLoad = libLoad || ev.Kind == events.KindLibLoad
		}
		// Hand over at once a library load (the process runs on into the
		// library) and an empty ring; under a steady stream, every poll.
		if !empty && !libLoad && time.Since(last) < d.poll && len(buf) < 1<<14 {
			continue
		}
		if !d.hand(buf, libLoad, empty, nil) {
			return
		}
		buf, libLoad, last = buf[:0], false, time.Now()
	}
}

// hand adds buf to the held events, waiting while too many are held, and
// wakes the loop. It says whether to read on.
func (d *drainer) hand(buf []events.Event, libLoad, empty bool, err error) bool {
	d.mu.Lock()
	for len(d.held) >= d.max && !d.stopped {
		d.space.Wait()
	}
	d.held = append(d.held, buf...)
	d.libLoad = d.libLoad || libLoad
	if empty {
		d.emptied++
	}
	if err != nil {
		d.err = err
	}
	stopped := d.stopped
	d.mu.Unlock()
	select {
	case d.ready <- struct{}{}:
	default:
	}
	return !stopped && err == nil
}

// take appends the held events to batch and says whether a library load
// was among them, how many empty reads there have been, and what ended
// reading, if anything did.
func (d *drainer) take(batch []events.Event) ([]events.Event, bool, uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	batch = append(batch, d.held...)
	clear(d.held) // drop the frames' references
	d.held = d.held[:0]
	libLoad := d.libLoad
	d.libLoad = false
	d.space.Broadcast()
	return batch, libLoad, d.emptied, d.err
}

// emptiedNow is how many reads have found the ring buffer empty.
func (d *drainer) emptiedNow() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.emptied
}

// stop ends reading (the ring buffer must be closed too for a read in
// progress to end before its deadline) and waits for the goroutine.
func (d *drainer) stop() {
	d.mu.Lock()
	d.stopped = true
	d.space.Broadcast()
	d.mu.Unlock()
	<-d.done
}
