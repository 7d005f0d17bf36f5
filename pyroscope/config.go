package pyroscope

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Config is where profiles go and how hard to try. Zero fields take the
// defaults below.
type Config struct {
	// URL is the server's base URL, e.g. http://127.0.0.1:4040; /ingest is
	// appended to its path. It may not hold a user or password.
	URL string
	// User and Password are sent as basic auth (both or neither);
	// TenantID as X-Scope-OrgID.
	User, Password, TenantID string
	// Service names the series when an Upload does not (service_name).
	Service string
	// Labels are added to every upload's series; an Upload's own labels of
	// the same names win.
	Labels map[string]string
	// Interval is the profiling window. An upload that failed is retried
	// (rate limits, 5xx, refused, reset) until its window is over, then
	// counted failed: the next window's profiles matter more by then.
	Interval time.Duration
	// Timeout bounds one upload's request, answer included.
	Timeout time.Duration
	// Lanes is how many uploads are in flight at once.
	Lanes int
	// QueueLen and QueueBytes bound the uploads waiting to be sent (their
	// count and their gzipped bytes); past either, the oldest is dropped.
	QueueLen, QueueBytes int
	// MaxSamples and MaxProfileBytes are the server's limits on one
	// profile; a profile past them is trimmed of its smallest samples.
	MaxSamples, MaxProfileBytes int
}

// Defaults. A window's uploads are one per profile type (3) per process:
// 24 for a host of 8 ranks, so the queue holds about 2.5 windows of them,
// and 4 lanes send them in under a second where one takes 100 ms.
const (
	DefaultInterval   = 10 * time.Second
	DefaultTimeout    = 10 * time.Second
	DefaultLanes      = 4
	DefaultQueueLen   = 64
	DefaultQueueBytes = 64 << 20
	// The server's validation.max-profile-stacktrace-samples.
	DefaultMaxSamples = 16000
	// The server refuses 4 MiB (validation.max-profile-size-bytes), but a
	// push larger than its ingestion burst (distributor.ingestion-burst-
	// size-mb, 2 MiB by default) is refused as rate-limited at any rate
	// (422 resource_exhausted on /ingest, seen).
	DefaultMaxProfileBytes = 2 << 20
	// SpyName is what the server files gpuprof's profiles under
	// (pyroscope_spy); pyspy or rbspy would have it rewrite frame names.
	SpyName = "gpuprof"
)

// withDefaults checks cfg and fills its zero fields.
func (cfg Config) withDefaults() (Config, error) {
	if err := CheckURL(cfg.URL); err != nil {
		return cfg, err
	}
	if (cfg.User == "") != (cfg.Password == "") {
		return cfg, errors.New("pyroscope: basic auth needs both a user and a password")
	}
	if cfg.Service != "" {
		if err := checkService(cfg.Service); err != nil {
			return cfg, err
		}
	}
	for k, v := range cfg.Labels {
		if err := CheckLabel(k, v); err != nil {
			return cfg, err
		}
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&cfg.Interval, DefaultInterval}, {&cfg.Timeout, DefaultTimeout}} {
		if *d.v < 0 {
			return cfg, fmt.Errorf("pyroscope: negative duration %v", *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	for _, n := range []struct {
		v   *int
		def int
	}{{&cfg.Lanes, DefaultLanes}, {&cfg.QueueLen, DefaultQueueLen}, {&cfg.QueueBytes, DefaultQueueBytes},
		{&cfg.MaxSamples, DefaultMaxSamples}, {&cfg.MaxProfileBytes, DefaultMaxProfileBytes}} {
		if *n.v < 0 {
			return cfg, fmt.Errorf("pyroscope: negative limit %d", *n.v)
		}
		if *n.v == 0 {
			*n.v = n.def
		}
	}
	return cfg, nil
}

// ErrCredentialsInURL is CheckURL's error for a URL with user:password@:
// a password in a URL shows in ps and in shell history, so gpuprof takes
// it only apart from the URL.
var ErrCredentialsInURL = errors.New("the URL holds credentials: give them apart from it")

// CheckURL says whether raw is a server URL gpuprof can push to: http or
// https, a host, and no credentials.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err == nil && u.User != nil {
		return fmt.Errorf("pyroscope URL %s: %w", u.Redacted(), ErrCredentialsInURL)
	}
	shown := raw // never a password, even in a URL that does not parse
	if i := strings.LastIndex(raw, "@"); i >= 0 {
		shown = "..." + raw[i:]
	}
	switch {
	case err != nil || u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("pyroscope URL %q: give an http:// or https:// URL, e.g. http://127.0.0.1:4040", shown)
	case u.Host == "":
		return fmt.Errorf("pyroscope URL %q has no host: give e.g. http://127.0.0.1:4040", shown)
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("pyroscope URL %q: give the server's base URL, without a query or fragment", shown)
	}
	return nil
}
