package nvml

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/nvml/nvmlfake"
)

// logBuf collects a logger's lines; safe for the worker goroutine to write.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the lines at level (WARN, INFO ...) that hold every one of subs.
func (l *logBuf) lines(level string, subs ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, ln := range strings.Split(l.b.String(), "\n") {
		if !strings.Contains(ln, "level="+level+" ") {
			continue
		}
		for _, s := range subs {
			if !strings.Contains(ln, s) {
				continue next
			}
		}
		out = append(out, ln)
	}
	return out
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// fakeClock is a Config.Now whose every reading is step after the last
// (1s unless set: each round then finds the slow fields due).
type fakeClock struct{ now, step atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.step.Store(int64(time.Second))
	return c
}

func (c *fakeClock) Now() uint64 { return uint64(c.now.Add(c.step.Load())) }

// newSampler opens a sampler on h, logging into the returned buffer, and
// closes it when the test ends.
func newSampler(tb testing.TB, h *nvmlfake.Host, cfg Config) (*Sampler, *logBuf) {
	tb.Helper()
	logs := &logBuf{}
	cfg.Log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if cfg.Now == nil {
		cfg.Now = newFakeClock().Now
	}
	s, err := New(h.Srv, cfg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(s.Close)
	return s, logs
}
