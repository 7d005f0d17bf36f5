package pyroscope

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// The reasons come from real errors of Go's client, not made-up ones.
func TestTransportReasons(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := ln.Addr().String()
	ln.Close()
	_, err = http.Get("http://" + closedAddr + "/")
	if r := transportReason(err); r != Refused {
		t.Errorf("connection refused (%v) = %q, want refused", err, r)
	}

	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
	defer srv.Close()
	defer close(hang)
	_, err = (&http.Client{Timeout: 50 * time.Millisecond}).Get(srv.URL)
	if r := transportReason(err); r != Timeout {
		t.Errorf("client timeout (%v) = %q, want timeout", err, r)
	}
	if r := transportReason(errors.New("tls: bad certificate")); r != Network {
		t.Errorf("another error = %q, want network", r)
	}
}

func TestAttemptReasons(t *testing.T) {
	for a, want := range map[attempt]Reason{
		{status: 200}:                    "",
		{status: 200, logged: "read: x"}: Network,
		{status: 401}:                    Auth,
		{status: 403}:                    Auth,
		{status: 429}:                    RateLimited,
		{status: 422}:                    Rejected,
		{status: 422, logged: `upload profile: failed to upload: (422) '{"code":"unknown","message":"pushing IngestInput-pprof failed resource_exhausted: push rate limit (4.0 MiB) exceeded while adding 2.5 MiB"}'`}: RateLimited,
		{status: 400}:                   Rejected,
		{status: 301}:                   Rejected,
		{status: 500}:                   ServerError,
		{status: 503}:                   ServerError,
		{logged: "new http request: x"}: Other,
	} {
		if got := a.reason(); got != want {
			t.Errorf("%+v: %q, want %q", a, got, want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"7":                             7 * time.Second,
		"-1":                            0,
		"soon":                          0,
		"Fri, 02 Jan 2026 03:04:15 GMT": 10 * time.Second,
		"Fri, 02 Jan 2026 03:04:00 GMT": 0,
	} {
		if got := parseRetryAfter(v, now); got != want {
			t.Errorf("Retry-After %q = %v, want %v", v, got, want)
		}
	}
}

func TestBackoffGrowsWithJitter(t *testing.T) {
	for try, base := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second} {
		for range 20 {
			if d := backoff(try, 0); d < base*8/10 || d > base*12/10 {
				t.Fatalf("backoff(%d) = %v, want %v ± 20%%", try, d, base)
			}
		}
	}
	if d := backoff(0, 3*time.Second); d != 3*time.Second {
		t.Errorf("backoff with Retry-After 3s = %v", d)
	}
}
