package pyroscope

import (
	"math/rand/v2"
	"time"

	"github.com/grafana/pyroscope-go/upstream"
	"github.com/grafana/pyroscope-go/upstream/remote"
)

// lane sends one job at a time through its own remote.Remote: Upload,
// then Flush, which returns when the one job is done, so that the
// observer's last attempt is that job's.
type lane struct {
	p      *Pusher
	remote *remote.Remote
	obs    *observer
	done   chan struct{} // closed when run returns
}

func newLane(p *Pusher, obs *observer) (*lane, error) {
	r, err := remote.NewRemote(remote.Config{
		Address:           p.cfg.URL,
		BasicAuthUser:     p.cfg.User,
		BasicAuthPassword: p.cfg.Password,
		TenantID:          p.cfg.TenantID,
		// One worker: 0 makes Flush hang. The lane gives it one job at a
		// time, so its 20-job channel never fills.
		Threads: 1,
		Timeout: p.cfg.Timeout,
		Logger:  obs, // nil panics
		// Ours: the timeout and connection limits, and Close's cancel.
		HTTPClient: obs,
	})
	if err != nil {
		return nil, err
	}
	r.Start()
	return &lane{p: p, remote: r, obs: obs, done: make(chan struct{})}, nil
}

// run sends jobs until the Pusher stops it.
func (l *lane) run() {
	defer close(l.done)
	for {
		j := l.p.next()
		if j == nil {
			return
		}
		l.send(j)
	}
}

// send tries j until the server takes it, it fails for good, or its
// window (or Close's bound) is over, and counts how it ended.
func (l *lane) send(j *job) {
	for try := 0; ; try++ {
		if r := inWindow(j.at, time.Now()); r != "" {
			l.p.done(j, dropped, r, attempt{})
			return
		}
		l.remote.Upload(&upstream.UploadJob{
			Name:      j.name,
			StartTime: j.start,
			EndTime:   j.end,
			SpyName:   SpyName,
			Format:    upstream.FormatPprof,
			Profile:   j.data,
		})
		l.remote.Flush()
		a := l.obs.take()
		r := a.reason()
		switch {
		case r == "":
			l.p.done(j, sent, "", a)
			return
		case r == Closed:
			l.p.done(j, dropped, Closed, a)
			return
		}
		wake := time.Now().Add(backoff(try, a.retryAfter))
		if !retryable(r) || wake.After(l.p.retryDeadline(j)) {
			l.p.done(j, failed, r, a)
			return
		}
		if !l.p.sleepUntil(wake, j) {
			l.p.done(j, failed, r, a) // its retry would come too late
			return
		}
		l.p.retried(r, a)
	}
}

// backoff is how long to wait before try+1: what the server asked for,
// else 0.5 s doubling, with 20% jitter so that a fleet's hosts told 429
// together do not come back together.
func backoff(try int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return retryAfter
	}
	d := 500 * time.Millisecond << min(try, 6)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}
