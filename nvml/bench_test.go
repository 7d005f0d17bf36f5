package nvml

import (
	"io"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/nvml/nvmlfake"
	"golang.org/x/sys/unix"
)

// BenchmarkSampleRound is one round on the 8-GPU mock: the sampler's own
// cost (the worker hand-offs, bookkeeping, allocations), without the
// driver's. The mock records every call it gets, which adds to allocs/op.
func BenchmarkSampleRound(b *testing.B) {
	h := nvmlfake.NewHost()
	s, _ := newSampler(b, h, Config{})
	benchRounds(b, s, 0)
}

// BenchmarkSampleRoundReal is one round on this host's GPUs through the
// real libnvidia-ml.so.1, driver time included. Rounds are 100ms apart, as
// in use: NVML answers calls repeated at once from a cache, and GPM needs
// time between samples. So ns/op is the period; busy-ns/round is the round
// itself. It needs nothing from the repository, so a test binary (go test
// -c) runs it on a GPU host; -test.benchtime=10s for more rounds. Besides
// the whole round: the round without GPM, and NVML loaded but not asked
// (the floor: what the process costs between rounds).
// GPUPROF_BENCH_GPU=N samples only NVML index N (one GPU's cost on a host
// of several).
func BenchmarkSampleRoundReal(b *testing.B) {
	cfg := Config{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if v := os.Getenv("GPUPROF_BENCH_GPU"); v != "" {
		i, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("GPUPROF_BENCH_GPU=%q: want an NVML index", v)
		}
		cfg.GPUs = []int{i}
	}
	s, err := New(Open(), cfg)
	if err != nil {
		b.Skipf("no NVML on this host, nothing to measure: %v", err)
	}
	defer s.Close()
	b.Logf("%d GPUs: %+v", len(s.GPUs()), s.GPUs()[0])
	b.Run("round", func(b *testing.B) { benchRounds(b, s, 100*time.Millisecond) })
	for _, every := range []time.Duration{200 * time.Millisecond, time.Second} {
		b.Run("round-gpm-every-"+every.String(), func(b *testing.B) {
			s.cfg.GPMEvery = every
			defer func() { s.cfg.GPMEvery = gpmEvery }()
			benchRounds(b, s, 100*time.Millisecond)
		})
	}
	b.Run("idle", func(b *testing.B) { benchRounds(b, nil, 100*time.Millisecond) })
	time.Sleep(100 * time.Millisecond) // GPM needs the time between samples
	if smps := s.Sample(); len(smps) > 0 {
		b.Logf("a sample: %+v", smps[0]) // for a look at real values and units
	}
	for _, g := range s.gpus {
		g.unsupported.add(fGPM)
	}
	b.Run("round-without-GPM", func(b *testing.B) { benchRounds(b, s, 100*time.Millisecond) })
}

// benchRounds times Sample, a round every pace (0: back to back), and
// reports besides ns and allocs per round the share of one core the sampler
// (nil: none, only the pace)
// takes at 10 rounds a second: the CPU time (user and system, every thread,
// between rounds too) per round, times 10, over 1s.
func benchRounds(b *testing.B, s *Sampler, pace time.Duration) {
	if s != nil {
		s.Sample() // the first round differs: first calls, no GPM metrics yet
	}
	var tick <-chan time.Time
	if pace > 0 {
		t := time.NewTicker(pace)
		defer t.Stop()
		tick = t.C
	}
	var busy time.Duration
	b.ReportAllocs()
	before := cpuTime(b)
	b.ResetTimer()
	for range b.N {
		if tick != nil {
			<-tick
		}
		start := time.Now()
		if s != nil && len(s.Sample()) == 0 {
			b.Fatal("a round with no sample")
		}
		busy += time.Since(start)
	}
	b.StopTimer()
	perRound := (cpuTime(b) - before) / time.Duration(b.N)
	b.ReportMetric(100*float64(perRound*10)/float64(time.Second), "%core@10Hz")
	if pace > 0 {
		b.ReportMetric(float64(busy)/float64(b.N), "busy-ns/round")
	}
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
