package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// closeWithin bounds Close: a scrape in flight gets this long to finish,
// then its connection is cut, so that gpuprof exits promptly however
// the scraper behaves.
const closeWithin = 2 * time.Second

// ParseAddr reads --metrics-addr: a bare port (9464 or :9464) listens on
// 127.0.0.1, so nothing is exposed beyond the host unless asked; HOST:PORT
// as given (0.0.0.0:9464 for every interface). Port 0 picks a free one.
func ParseAddr(s string) (string, error) {
	// The caller names the value (pflag does: invalid argument "x" for ...).
	bad := errors.New("give a port (9464, or :9464, for 127.0.0.1:9464) or HOST:PORT (0.0.0.0:9464 to listen on every interface)")
	if !strings.Contains(s, ":") {
		s = ":" + s
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", bad
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || strconv.FormatUint(n, 10) != port {
		return "", bad
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if strings.ContainsAny(host, " /") {
		return "", bad
	}
	return net.JoinHostPort(host, port), nil
}

// Start listens on addr (as ParseAddr gives it) and serves the metrics at
// /metrics, returning the address bound (the port picked, where addr's is 0).
func (e *Exporter) Start(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("serve metrics: %w", err)
	}
	if err := e.Serve(ln); err != nil {
		ln.Close()
		return "", err
	}
	return ln.Addr().String(), nil
}

// Serve serves the metrics on ln, which Close closes: for a caller that
// binds the port early, before it has an Exporter to serve.
func (e *Exporter) Serve(ln net.Listener) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.srv != nil {
		return errors.New("serve metrics: already serving on " + e.addr)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", e.Handler())
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "gpuprof: metrics at /metrics")
	})
	e.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	e.addr = ln.Addr().String()
	e.done = make(chan error, 1)
	go func() { e.done <- e.srv.Serve(ln) }()
	return nil
}

// Addr is the address served on ("" before Start or Serve).
func (e *Exporter) Addr() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.addr
}

// Close stops the server within closeWithin. It may be called more than
// once, and on an Exporter never served.
func (e *Exporter) Close() error {
	e.mu.Lock()
	srv, done := e.srv, e.done
	e.srv = nil
	e.mu.Unlock()
	if srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeWithin)
	defer cancel()
	err := srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close() // cut the scrapes still in flight
	}
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("stop serving metrics: %w", err)
	}
	return nil
}
