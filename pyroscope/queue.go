package pyroscope

import "time"

// job is one upload, encoded, waiting for a lane.
type job struct {
	name       string // service{labels}
	start, end time.Time
	at         time.Time // the profile's own time (TimeNanos): what the server's window is checked on
	data       []byte
	// deadline ends its retries: its window's end, when the next
	// window's profiles arrive.
	deadline time.Time
}

// queue is a bounded FIFO of jobs: past maxLen jobs or maxBytes of them
// the oldest go, so that a server that is down or slow costs a bounded
// amount of memory and the newest profiles are the ones kept. It does no
// locking: the Pusher's mutex guards it.
type queue struct {
	jobs             []*job
	bytes            int
	maxLen, maxBytes int
	peak             int
}

// push adds j and returns the jobs it pushed out, oldest first.
func (q *queue) push(j *job) (out []*job) {
	q.jobs = append(q.jobs, j)
	q.bytes += len(j.data)
	// A job bigger than maxBytes alone is kept: it fits the server's
	// limits (encode), and dropping it would drop every profile of its
	// size.
	for len(q.jobs) > q.maxLen || q.bytes > q.maxBytes && len(q.jobs) > 1 {
		out = append(out, q.pop())
	}
	q.peak = max(q.peak, len(q.jobs))
	return out
}

// pop takes the oldest job; nil when empty.
func (q *queue) pop() *job {
	if len(q.jobs) == 0 {
		return nil
	}
	j := q.jobs[0]
	q.jobs[0] = nil
	q.jobs = q.jobs[1:]
	q.bytes -= len(j.data)
	if len(q.jobs) == 0 {
		q.jobs = q.jobs[:0:0] // let the backing array go once drained
	}
	return j
}

func (q *queue) len() int { return len(q.jobs) }
