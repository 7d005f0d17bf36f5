package nvml

import (
	"errors"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuprof/gpuprof/events"
)

// ErrUnavailable is what New's error wraps where there is no NVML to use:
// no driver library, or no driver loaded.
var ErrUnavailable = errors.New("NVML not available")

// setupTimeout bounds Init and each call of the enumeration. Without
// persistence mode the driver brings each GPU up on Init, which takes
// seconds on an 8-GPU host: CallTimeout, sized for sampling, is too short.
const setupTimeout = 30 * time.Second

// New initializes NVML through lib and finds the GPUs to sample
// (cfg.GPUs, or all). Where NVML is missing its error, which wraps
// ErrUnavailable, is one line saying so and what to do.
func New(lib Library, cfg Config) (*Sampler, error) {
	cfg = cfg.withDefaults()
	s := &Sampler{lib: lib, cfg: cfg, log: cfg.Log, calls: newCaller(cfg.Log), stop: make(chan struct{})}
	ret, err := s.calls.do("Init", -1, setupTimeout, lib.Init)
	switch {
	case err != nil:
		err = fmt.Errorf("NVML Init: %w: GPU hardware state is left out", err)
	case ret != nvml.SUCCESS:
		err = initError(ret)
	}
	if err != nil {
		s.calls.close()
		return nil, err
	}
	if err := s.enumerate(); err != nil {
		s.Close()
		return nil, err
	}
	s.eventReasons = lib.Extensions().LookupSymbol(symClocksEventReasons) == nil
	s.memoryV2 = lib.Extensions().LookupSymbol(symMemoryInfoV2) == nil
	s.setupGPM()
	s.flushNotices()
	return s, nil
}

func initError(ret nvml.Return) error {
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return fmt.Errorf("%w (libnvidia-ml.so.1 not found): GPU hardware state is left out; "+
			"install the NVIDIA driver, or put its libnvidia-ml.so.1 on the loader path", ErrUnavailable)
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return fmt.Errorf("%w (NVIDIA driver not loaded): GPU hardware state is left out; "+
			"load the driver (nvidia-smi should then list the GPUs)", ErrUnavailable)
	case nvml.ERROR_NO_PERMISSION:
		return fmt.Errorf("%w (no permission to open the GPU devices): GPU hardware state is left out; "+
			"run with access to /dev/nvidia*", ErrUnavailable)
	}
	return fmt.Errorf("NVML Init: %v: GPU hardware state is left out", ret)
}

// enumerate opens the GPUs to sample and reads their identity. A GPU that
// cannot be opened is an error where asked for by index, and skipped with a
// warning where all were asked for.
func (s *Sampler) enumerate() error {
	var count int
	err := callErr(s.calls.do("DeviceGetCount", -1, setupTimeout, func() (r nvml.Return) {
		count, r = s.lib.DeviceGetCount()
		return r
	}))
	if err != nil {
		return fmt.Errorf("count GPUs: %w", err)
	}
	want := s.cfg.GPUs
	if want == nil {
		for i := range count {
			want = append(want, i)
		}
	}
	seen := make(map[int]bool, len(want))
	for _, i := range want {
		if i < 0 || i >= count {
			return fmt.Errorf("GPU %d does not exist: NVML sees %d GPUs", i, count)
		}
		if seen[i] {
			continue
		}
		seen[i] = true
		g, err := s.open(i)
		if err != nil && s.cfg.GPUs != nil {
			return err
		}
		if err != nil {
			s.log.Warn("GPU left out", "gpu", i, "err", err)
			continue
		}
		s.gpus = append(s.gpus, g)
	}
	if len(s.gpus) == 0 {
		return fmt.Errorf("no GPU to sample: NVML sees %d GPUs and none could be opened", count)
	}
	return nil
}

// open gets GPU i's handle and identity. Identity calls that fail leave
// their field empty: the GPU can still be sampled.
func (s *Sampler) open(i int) (*gpu, error) {
	var h nvml.Device
	err := callErr(s.calls.do("DeviceGetHandleByIndex", i, setupTimeout, func() (r nvml.Return) {
		h, r = s.lib.DeviceGetHandleByIndex(i)
		return r
	}))
	if err != nil {
		return nil, fmt.Errorf("open GPU %d: %w", i, err)
	}
	g := &gpu{dev: h, info: events.GPU{Index: i}}
	var pci nvml.PciInfo
	s.identity(i, "GetIndex", func() (r nvml.Return) { g.info.Index, r = h.GetIndex(); return })
	s.identity(i, "GetUUID", func() (r nvml.Return) { g.info.UUID, r = h.GetUUID(); return })
	s.identity(i, "GetName", func() (r nvml.Return) { g.info.Name, r = h.GetName(); return })
	if s.identity(i, "GetPciInfo", func() (r nvml.Return) { pci, r = h.GetPciInfo(); return }) {
		g.info.BusID = cString(pci.BusId[:])
	}
	var maxSM uint32
	if s.identity(i, "GetMaxClockInfo", func() (r nvml.Return) { maxSM, r = h.GetMaxClockInfo(nvml.CLOCK_SM); return }) {
		g.maxSMClock = float64(maxSM)
	}
	return g, nil
}

func (s *Sampler) identity(i int, name string, call func() nvml.Return) bool {
	err := callErr(s.calls.do(name, i, setupTimeout, call))
	if err != nil {
		s.log.Debug("GPU identity incomplete", "gpu", i, "call", name, "err", err)
	}
	return err == nil
}

// cString is the string in a NUL-terminated C char array.
func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

// Close frees what the sampler holds and shuts NVML down, each call bounded
// by CallTimeout; where a call is stuck it leaves NVML as it is, to the
// process's exit. Sample returns nothing after Close.
func (s *Sampler) Close() {
	s.closing.Do(func() {
		s.mu.Lock()
		close(s.stop) // under mu: see registerXids
		s.mu.Unlock()
		// Shutting NVML down under a thread still waiting on it is asking
		// for trouble; exit cleans up as well.
		idle := s.awaitXids()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.closed = true
		s.freeGPM()
		if idle {
			if err := callErr(s.calls.do("Shutdown", -1, s.cfg.CallTimeout, s.lib.Shutdown)); err != nil {
				s.log.Debug("NVML not shut down", "err", err)
			}
		}
		s.calls.close()
	})
}
