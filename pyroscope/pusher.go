package pyroscope

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/google/pprof/profile"
)

// Upload is one profile of one series over one window.
type Upload struct {
	// Service is the series' service_name; "" takes Labels'
	// "service_name", else Config.Service. It is sanitized.
	Service string
	// Labels are the series' labels (host, pid, rank, gpu, group):
	// names as CheckLabelName allows, values sanitized
	// (SanitizeLabelValue), an empty value leaving the label out.
	Labels map[string]string
	// Start and End are the window. The server files the samples at the
	// profile's TimeNanos, which Push sets to Start where it is 0 (and
	// DurationNanos to End-Start); End 0 is now.
	Start, End time.Time
	// Profile is read before Push returns and not kept.
	Profile *profile.Profile
}

// CloseBound is how long Close takes at most, whatever the server does.
const CloseBound = 5 * time.Second

// Pusher sends Uploads to a Pyroscope server from a bounded queue, on
// Config.Lanes lanes, counting what becomes of each (Stats).
type Pusher struct {
	cfg Config
	log *slog.Logger

	// ctx ends the lanes' requests and sleeps: Close cancels it when its
	// flush runs out of time.
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{} // a job was queued (buffered 1)
	drain  chan struct{} // closed by Close: lanes return once the queue is empty
	lanes  []*lane

	mu       sync.Mutex
	q        queue
	st       Stats
	closed   bool
	flushBy  time.Time            // Close's flush deadline, once closing
	warned   map[Reason]time.Time // when each reason was last logged
	unsentAt map[Reason]uint64    // failures and drops since the last success
	resumed  time.Time            // when "uploads resumed" was last logged

	closeOnce sync.Once
	closeErr  error
}

// New starts a Pusher's lanes; nothing is sent until Push. log gets a
// warning when uploads start to fail or be dropped (a reason at most once
// a minute), and a note when they resume.
func New(cfg Config, log *slog.Logger) (*Pusher, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pusher{
		cfg: cfg, log: log, ctx: ctx, cancel: cancel,
		wake: make(chan struct{}, 1), drain: make(chan struct{}),
		q:      queue{maxLen: cfg.QueueLen, maxBytes: cfg.QueueBytes},
		st:     Stats{Failed: map[Reason]uint64{}, Dropped: map[Reason]uint64{}},
		warned: map[Reason]time.Time{}, unsentAt: map[Reason]uint64{},
	}
	client := newHTTPClient(cfg)
	for range cfg.Lanes {
		l, err := newLane(p, &observer{ctx: ctx, client: client, log: log})
		if err != nil {
			cancel()
			for _, l := range p.lanes {
				l.remote.Stop()
			}
			return nil, fmt.Errorf("pyroscope: %w", err)
		}
		p.lanes = append(p.lanes, l)
	}
	for _, l := range p.lanes {
		go l.run()
	}
	return p, nil
}

// Push queues u to be sent and returns: it never waits for the server.
// What it cannot queue (Stats.Dropped says why) it drops: a name or
// profile the server would refuse, a time outside the server's window,
// and, with the queue full, the oldest queued upload.
func (p *Pusher) Push(u Upload) {
	p.mu.Lock()
	p.st.Pushed++
	closed := p.closed
	p.mu.Unlock()
	if closed {
		p.drop(Closed, "pushed after Close")
		return
	}
	j, r, err := p.prepare(u)
	if err != nil {
		p.drop(r, err.Error())
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.drop(Closed, "pushed after Close")
		return
	}
	out := p.q.push(j)
	p.st.QueuePeak = p.q.peak
	p.mu.Unlock()
	for range out {
		p.drop(QueueFull, fmt.Sprintf("upload queue full (%d profiles, %s): the oldest dropped", p.cfg.QueueLen, mib(uint64(p.cfg.QueueBytes))))
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// prepare names, checks and encodes u.
func (p *Pusher) prepare(u Upload) (*job, Reason, error) {
	labels := maps.Clone(p.cfg.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range u.Labels {
		if k == "service_name" {
			continue
		}
		if err := CheckLabelName(k); err != nil {
			return nil, Invalid, err
		}
		if v = SanitizeLabelValue(v); v == "" {
			delete(labels, k)
			continue
		}
		labels[k] = v
	}
	service := SanitizeService(firstOf(u.Service, u.Labels["service_name"], p.cfg.Service))
	if service == "" {
		return nil, Invalid, fmt.Errorf("no service name: give Upload.Service or Config.Service")
	}
	if u.Profile == nil {
		return nil, Invalid, fmt.Errorf("upload of %s: no profile", service)
	}
	if n := serverLabels + len(labels) + len(stringLabelNames(u.Profile)); n > maxSeriesLabels {
		return nil, Invalid, fmt.Errorf("series %s would have %d labels, the server takes %d", service, n, maxSeriesLabels)
	}
	if u.Start.IsZero() {
		return nil, Invalid, fmt.Errorf("upload of %s: no start time", service)
	}
	if u.End.IsZero() {
		u.End = time.Now()
	}
	if u.Profile.TimeNanos == 0 {
		u.Profile.TimeNanos = u.Start.UnixNano()
	}
	if u.Profile.DurationNanos == 0 && u.End.After(u.Start) {
		u.Profile.DurationNanos = u.End.Sub(u.Start).Nanoseconds()
	}
	at := time.Unix(0, u.Profile.TimeNanos)
	if r := inWindow(at, time.Now()); r != "" {
		return nil, r, fmt.Errorf("profile of %s at %s: outside the server's ingestion window (%v back, %v ahead)", service, at.Format(time.RFC3339), maxAge, maxAhead)
	}
	enc, r, err := encode(u.Profile, p.cfg.MaxSamples, p.cfg.MaxProfileBytes)
	if err != nil {
		return nil, r, fmt.Errorf("profile of %s: %w", service, err)
	}
	if enc.trimmed > 0 {
		p.mu.Lock()
		p.st.Trimmed++
		p.st.TrimmedSamples += uint64(enc.trimmed)
		p.mu.Unlock()
	}
	return &job{
		name: seriesName(service, labels), start: u.Start, end: u.End, at: at, data: enc.data,
		deadline: time.Now().Add(p.cfg.Interval),
	}, "", nil
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// next is the lanes' next job; nil once they are to return.
func (p *Pusher) next() *job {
	for {
		p.mu.Lock()
		if j := p.q.pop(); j != nil {
			p.st.InFlight++
			more := p.q.len() > 0
			p.mu.Unlock()
			if more { // another lane may take the rest
				select {
				case p.wake <- struct{}{}:
				default:
				}
			}
			return j
		}
		p.mu.Unlock()
		select {
		case <-p.wake:
		case <-p.drain:
			p.mu.Lock()
			empty := p.q.len() == 0
			p.mu.Unlock()
			if empty {
				return nil
			}
		case <-p.ctx.Done():
			return nil
		}
	}
}

type outcome int

const (
	sent outcome = iota
	failed
	dropped
)

// done counts how a lane's job ended.
func (p *Pusher) done(j *job, o outcome, r Reason, a attempt) {
	p.mu.Lock()
	p.st.InFlight--
	p.mu.Unlock()
	switch o {
	case sent:
		p.mu.Lock()
		p.st.Sent++
		p.st.SentBytes += uint64(len(j.data))
		unsent := p.unsentAt
		note := len(unsent) > 0 && time.Since(p.resumed) >= logEvery
		if note {
			p.unsentAt, p.warned, p.resumed = map[Reason]uint64{}, map[Reason]time.Time{}, time.Now()
		}
		p.mu.Unlock()
		if note {
			p.log.Info("pyroscope: uploads resumed", "url", p.cfg.URL, "failed_or_dropped", byReason(unsent))
		}
	case failed:
		p.count(p.st.Failed, r, a.message(), "upload failed; profiling goes on, and what is not sent is counted")
	case dropped:
		msg := a.message()
		if a == (attempt{}) {
			msg = fmt.Sprintf("profile of %s outside the server's ingestion window", j.name)
		}
		p.count(p.st.Dropped, r, msg, "profile dropped; profiling goes on, and what is not sent is counted")
	}
}

// drop counts an upload dropped before it reached a lane.
func (p *Pusher) drop(r Reason, msg string) {
	p.count(p.st.Dropped, r, msg, "profile dropped; profiling goes on, and what is not sent is counted")
}

// logEvery throttles the log: a server that fails now and then, or a
// queue that overflows each window, gets a line a minute, not one a
// window.
const logEvery = time.Minute

// count adds one to m[r] and logs a warning the first time r is seen
// since uploads last resumed, and at most once a logEvery after.
func (p *Pusher) count(m map[Reason]uint64, r Reason, msg, what string) {
	p.mu.Lock()
	m[r]++
	p.unsentAt[r]++
	p.st.LastError, p.st.LastErrorAt = msg, time.Now()
	warn := time.Since(p.warned[r]) >= logEvery
	if warn {
		p.warned[r] = time.Now()
	}
	p.mu.Unlock()
	if warn {
		p.log.Warn("pyroscope: "+what, "url", p.cfg.URL, "reason", string(r), "err", msg)
	}
}

func (p *Pusher) retried(r Reason, a attempt) {
	p.mu.Lock()
	p.st.Retries++
	p.st.LastError, p.st.LastErrorAt = a.message(), time.Now()
	p.mu.Unlock()
}

// retryDeadline is when j's retries end: its window's end, or Close's
// flush deadline if that comes first.
func (p *Pusher) retryDeadline(j *job) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.flushBy.IsZero() && p.flushBy.Before(j.deadline) {
		return p.flushBy
	}
	return j.deadline
}

// sleepUntil waits for a retry of j at wake. It ends early, false, if
// Close gives up on the lanes or, once Close has begun, if wake is past
// its flush deadline: a retry 30 s away does not hold the exit.
func (p *Pusher) sleepUntil(wake time.Time, j *job) bool {
	t := time.NewTimer(time.Until(wake))
	defer t.Stop()
	drain := p.drain
	for {
		select {
		case <-t.C:
			return true
		case <-drain:
			if wake.After(p.retryDeadline(j)) {
				return false
			}
			drain = nil // closed: wait on the rest alone
		case <-p.ctx.Done():
			return false
		}
	}
}

// Stats is what became of the uploads so far.
func (p *Pusher) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.st.clone()
	st.Queued, st.QueuedBytes = p.q.len(), p.q.bytes
	return st
}
