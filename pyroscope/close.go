package pyroscope

import (
	"context"
	"fmt"
	"time"
)

// stopGrace is the part of CloseBound kept for ending the lanes once the
// flush has run out of time: cancelling their requests and stopping
// pyroscope-go's workers takes milliseconds, unless something hangs.
const stopGrace = time.Second

// Close sends what is queued and returns within CloseBound, or sooner if
// ctx ends: at the bound, requests in flight are cancelled and what is
// left is counted dropped (Closed). It returns an error saying how many
// profiles were not sent in it; uploads that failed before are in Stats.
// Close may be called again: it returns the first call's result.
func (p *Pusher) Close(ctx context.Context) error {
	p.closeOnce.Do(func() { p.closeErr = p.close(ctx) })
	return p.closeErr
}

func (p *Pusher) close(ctx context.Context) error {
	start := time.Now()
	flushBy := start.Add(CloseBound - stopGrace)
	if d, ok := ctx.Deadline(); ok && d.Before(flushBy) {
		flushBy = d
	}
	p.mu.Lock()
	p.closed, p.flushBy = true, flushBy
	before := p.st.Dropped[Closed] + p.st.FailedTotal()
	p.mu.Unlock()
	close(p.drain)

	flushed := make(chan struct{})
	go func() {
		for _, l := range p.lanes {
			<-l.done
		}
		close(flushed)
	}()
	timer := time.NewTimer(time.Until(flushBy))
	defer timer.Stop()
	select {
	case <-flushed:
	case <-timer.C:
	case <-ctx.Done():
	}
	// Cancel what is in flight; the lanes see it and return.
	p.cancel()
	grace, cancel := context.WithDeadline(context.Background(), start.Add(CloseBound-50*time.Millisecond))
	defer cancel()
	stuck := 0
	for _, l := range p.lanes {
		select {
		case <-l.done:
			// Only now: pyroscope-go's Stop panics when called twice and
			// loses a job it is given after it.
			l.remote.Stop()
		case <-grace.Done():
			stuck++
		}
	}

	p.mu.Lock()
	left := p.q.len()
	for p.q.pop() != nil {
	}
	p.mu.Unlock()
	for range left {
		p.drop(Closed, "still queued when Close's bound ran out")
	}
	p.mu.Lock()
	unsent := p.st.Dropped[Closed] + p.st.FailedTotal() - before
	last := p.st.LastError
	p.mu.Unlock()
	switch {
	case stuck > 0:
		return fmt.Errorf("pyroscope: %d upload lanes did not stop within %v; %d profiles not sent at exit (last error: %s)", stuck, CloseBound, unsent, last)
	case unsent > 0:
		return fmt.Errorf("pyroscope: %d profiles not sent at exit (last error: %s)", unsent, last)
	}
	return nil
}
