package pyroscope

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// newHTTPClient is the client every lane's requests go through. Giving
// pyroscope-go a client replaces its own, so this one sets what that did:
// the timeout, a connection per lane, and no redirects (Go drops the
// Authorization header on one, and the server would answer 401 to a
// user who set it right).
func newHTTPClient(cfg Config) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{Timeout: min(cfg.Timeout, 5*time.Second), KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout: min(cfg.Timeout, 5*time.Second),
			MaxConnsPerHost:     cfg.Lanes,
			MaxIdleConnsPerHost: cfg.Lanes,
			IdleConnTimeout:     90 * time.Second,
			ForceAttemptHTTP2:   true,
		},
		Timeout:       cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// attempt is what one upload attempt came to, as the lane's observer saw
// it.
type attempt struct {
	status     int           // the HTTP status; 0 with no answer
	err        error         // the transport's error
	retryAfter time.Duration // the answer's Retry-After, if any
	logged     string        // pyroscope-go's error message, if it gave one
}

// reason is why the attempt failed; "" if the server took the profile.
func (a attempt) reason() Reason {
	switch {
	case a.err != nil:
		return transportReason(a.err)
	case a.status == http.StatusUnauthorized || a.status == http.StatusForbidden:
		return Auth
	case a.status == http.StatusTooManyRequests:
		return RateLimited
	case a.status == http.StatusUnprocessableEntity && strings.Contains(a.logged, "resource_exhausted"):
		// Pyroscope v1.9.0's /ingest answers its rate limit with 422,
		// "resource_exhausted: push rate limit ... exceeded" (seen).
		return RateLimited
	case a.status >= 500:
		return ServerError
	case a.status != 0 && a.status != http.StatusOK:
		return Rejected // 4xx, and a redirect: the URL is not the server's
	case a.status == http.StatusOK && a.logged != "":
		return Network // the answer's body could not be read
	case a.status == http.StatusOK:
		return ""
	}
	return Other
}

func transportReason(err error) Reason {
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return Closed // Close's bound ran out while it was in flight
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return Timeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return Refused
	}
	return Network
}

// retryable are the reasons a later attempt may fare better: a server
// restarting, overloaded or rate-limiting. A timeout is not among them:
// it has held the lane for Config.Timeout already, and the queue behind
// it is the backlog.
func retryable(r Reason) bool {
	return r == Refused || r == Network || r == RateLimited || r == ServerError
}

// message is the attempt's error for Stats.LastError: pyroscope-go's text
// (it holds the server's answer), else the transport's.
func (a attempt) message() string {
	msg := a.logged
	if msg == "" && a.err != nil {
		msg = a.err.Error()
	}
	if msg == "" {
		msg = fmt.Sprintf("HTTP %d", a.status)
	}
	return truncate(msg, 300)
}

// observer is one lane's HTTP client and Logger for pyroscope-go: it sees
// the one request of the lane in flight, so the lane knows how its job
// fared, and it binds the request to ctx, which Close cancels.
type observer struct {
	ctx    context.Context
	client *http.Client
	log    *slog.Logger

	mu   sync.Mutex
	last attempt
}

// Do is remote.HTTPClient's.
func (o *observer) Do(req *http.Request) (*http.Response, error) {
	resp, err := o.client.Do(req.WithContext(o.ctx))
	a := attempt{err: err}
	if resp != nil {
		a.status = resp.StatusCode
		a.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	o.mu.Lock()
	o.last.status, o.last.err, o.last.retryAfter = a.status, a.err, a.retryAfter
	o.mu.Unlock()
	return resp, err
}

// take returns the last attempt's outcome and forgets it.
func (o *observer) take() attempt {
	o.mu.Lock()
	defer o.mu.Unlock()
	a := o.last
	o.last = attempt{}
	return a
}

// Infof, Debugf and Errorf are remote.Logger's. Its errors are about the
// lane's one job: they are kept for that job's outcome, and logged by the
// Pusher as it counts them, not here.
func (o *observer) Infof(format string, args ...any) {
	o.log.Debug("pyroscope-go: " + fmt.Sprintf(format, args...))
}

func (o *observer) Debugf(format string, args ...any) {
	o.log.Debug("pyroscope-go: " + fmt.Sprintf(format, args...))
}

func (o *observer) Errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	o.log.Debug("pyroscope-go: " + msg)
	o.mu.Lock()
	o.last.logged = msg
	o.mu.Unlock()
}

// parseRetryAfter reads a Retry-After header: seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
