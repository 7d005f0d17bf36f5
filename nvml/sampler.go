package nvml

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuprof/gpuprof/events"
)

// Config says what to sample and how often. The zero value samples every GPU
// every 100ms.
type Config struct {
	Interval    time.Duration // between sampling rounds; default 100ms
	CallTimeout time.Duration // bound on every NVML call; default 1s
	GPMEvery    time.Duration // GPM samples at most this often; 0: 500ms (gpm.go); negative: no GPM
	GPUs        []int         // NVML indexes to sample; nil: all
	Log         *slog.Logger  // default slog.Default()
	Now         func() uint64 // CLOCK_MONOTONIC ns, safe to call from any goroutine; default clock_gettime
}

func (c Config) withDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = 100 * time.Millisecond
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = time.Second
	}
	if c.GPMEvery == 0 {
		c.GPMEvery = gpmEvery
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Now == nil {
		c.Now = monotonicNow
	}
	return c
}

// monotonicNow is CLOCK_MONOTONIC in ns, the clock the probes' events carry.
func monotonicNow() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0 // cannot happen on Linux
	}
	return uint64(ts.Nano())
}

// Sampler reads the hardware state of a host's GPUs through NVML. Its
// methods may be called from several goroutines; rounds take turns.
type Sampler struct {
	lib   Library
	cfg   Config
	log   *slog.Logger
	calls *caller
	gpus  []*gpu

	// eventReasons: the driver has GetCurrentClocksEventReasons (R535+);
	// older ones have the same bitmask as GetCurrentClocksThrottleReasons.
	eventReasons bool
	// memoryV2: the driver has GetMemoryInfo_v2 (R510+), whose "used"
	// leaves out the memory the driver reserves, as nvidia-smi shows it.
	memoryV2 bool

	failed atomic.Uint64 // sampling calls that failed (Errors)

	mu      sync.Mutex // one round (or process listing, or Close) at a time
	closed  bool
	warned  fieldSet                // fields warned about as unsupported
	pending [numFields]pendingField // found unsupported this round

	stop    chan struct{}  // closed by Close: Xid watching ends
	xids    sync.WaitGroup // Xid waiters still in an NVML wait
	closing sync.Once
}

// gpu is one sampled GPU and what the sampler knows of it.
type gpu struct {
	info        events.GPU
	dev         Device
	unsupported fieldSet
	lost        bool
	answered    bool // some call succeeded this round
	askedOnce   fieldSet
	askedAt     [numFields]uint64 // when each slow field was last asked (Config.Now)

	gpm        *gpmState // nil where GPM is unsupported
	lastSeenUs uint64    // GetProcessUtilization's lastSeenTimestamp
	maxSMClock float64   // MHz; 0 where unknown
}

// hasGPM says whether g's GPM metrics are read (and so its PCIe traffic).
func (g *gpu) hasGPM() bool { return g.gpm != nil && !g.unsupported.has(fGPM) }

// GPUs returns the GPUs sampled, as New found them (lost ones included).
func (s *Sampler) GPUs() []events.GPU {
	out := make([]events.GPU, len(s.gpus))
	for i, g := range s.gpus {
		out[i] = g.info
	}
	return out
}

// Sample takes one round: one sample per live GPU, with the fields that GPU
// answered. It returns nothing while an NVML call is stuck (see caller), and
// returns within about CallTimeout even if a call hangs.
func (s *Sampler) Sample() []events.GPUSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.calls.stuck() {
		return nil
	}
	out := make([]events.GPUSample, 0, len(s.gpus))
	for _, g := range s.gpus {
		if g.lost {
			continue
		}
		g.answered = false
		smp := events.NewGPUSample(g.info.Index, s.cfg.Now())
		s.readDevice(g, &smp)
		s.readGPM(g, &smp)
		s.readProcs(g, &smp)
		// A GPU lost mid-round, or one whose calls were all cut short by a
		// stuck call, has nothing to say.
		if !g.lost && g.answered {
			out = append(out, smp)
		}
	}
	s.flushNotices()
	return out
}

// Run takes a round at once and then every Interval, handing each to out,
// until ctx is done. A round slower than Interval delays the next one
// rather than piling up.
func (s *Sampler) Run(ctx context.Context, out func([]events.GPUSample)) {
	tick := time.NewTicker(s.cfg.Interval)
	defer tick.Stop()
	for ctx.Err() == nil {
		if smp := s.Sample(); len(smp) > 0 {
			out(smp)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
