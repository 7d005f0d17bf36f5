package nvml

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// unsupported says whether ret means the GPU (or this driver, or our
// privileges) will never answer the call: asking again is pointless.
func unsupported(ret nvml.Return) bool {
	return ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_NO_PERMISSION || ret == nvml.ERROR_FUNCTION_NOT_FOUND
}

// lost says whether ret means the GPU is gone (fallen off the bus).
func lost(ret nvml.Return) bool {
	return ret == nvml.ERROR_GPU_IS_LOST || ret == nvml.ERROR_GPU_NOT_FOUND
}

// ask makes call, which reads field f of g, unless g is lost, f is known
// unsupported on g, f was read too recently (fields' every), or NVML is
// stuck; it says whether the call succeeded. Failures are booked here: an
// unsupported field for one warning after the round (notice), a lost GPU at
// once.
func (s *Sampler) ask(g *gpu, f field, call func() nvml.Return) bool {
	return s.askAs(g, f, fields[f].call, call)
}

// askAs is ask for a call other than the one that names f.
func (s *Sampler) askAs(g *gpu, f field, name string, call func() nvml.Return) bool {
	if g.lost || g.unsupported.has(f) || s.calls.stuck() {
		return false
	}
	if every := uint64(fields[f].every); every > 0 {
		now := s.cfg.Now()
		if g.askedAt[f] != 0 && now-g.askedAt[f] < every {
			return false
		}
		// The first ask does not start the wait, so the first two rounds
		// both have the field: GetProcessUtilization's first answer is the
		// driver's history, its second the first over one round (all that
		// gpuprof gpus, two rounds apart, shows).
		if g.askedOnce.has(f) {
			g.askedAt[f] = now
		}
		g.askedOnce.add(f)
	}
	return s.askNow(g, f, name, call)
}

// askNow is askAs whatever the field's cadence: for a caller that needs
// the answer now (attach --gpus listing processes), not a round.
func (s *Sampler) askNow(g *gpu, f field, name string, call func() nvml.Return) bool {
	if g.lost || g.unsupported.has(f) || s.calls.stuck() {
		return false
	}
	ret, err := s.calls.do(name, g.info.Index, s.cfg.CallTimeout, call)
	switch {
	case errors.Is(err, errTimedOut):
		s.failed.Add(1)
		return false // logged
	case err != nil:
		return false // not made
	case ret == nvml.SUCCESS:
		g.answered = true
		return true
	case unsupported(ret):
		g.unsupported.add(f)
		s.notice(f, g.info.Index, name, ret)
	case lost(ret):
		s.failed.Add(1)
		g.lost = true
		s.log.Warn("GPU lost: no longer sampled", "gpu", g.info.Index, "call", name, "err", ret.Error())
	default:
		// Transient (ERROR_UNKNOWN, ERROR_TIMEOUT ...): absent this round only.
		s.failed.Add(1)
		s.log.Debug("NVML call failed", "call", name, "gpu", g.info.Index, "err", ret.Error())
	}
	return false
}

// Errors counts the sampling calls that failed: timed out, found the GPU
// lost, or failed for the round (ERROR_UNKNOWN ...). A field the GPU does
// not support is not one: it is asked once and left out.
func (s *Sampler) Errors() uint64 { return s.failed.Load() }

// pendingField gathers the GPUs on which a field turned out unsupported, so
// that one line names them all.
type pendingField struct {
	gpus []int
	call string
	ret  nvml.Return
}

// notice books field f as unsupported on GPU gpu, as call said, for flushNotices.
func (s *Sampler) notice(f field, gpu int, call string, ret nvml.Return) {
	p := &s.pending[f]
	if len(p.gpus) == 0 {
		p.call, p.ret = call, ret
	}
	p.gpus = append(p.gpus, gpu)
}

// flushNotices logs one warning for each field newly found unsupported,
// unless that field was warned about before: at most one line per field for
// the sampler's life, whatever the number of GPUs and rounds.
func (s *Sampler) flushNotices() {
	for f := range numFields {
		p := &s.pending[f]
		if len(p.gpus) == 0 {
			continue
		}
		if !s.warned.has(f) {
			s.warned.add(f)
			s.log.Warn("NVML: "+fields[f].what+" not available: left out",
				"call", p.call, "gpus", joinInts(p.gpus), "err", p.ret.Error())
		}
		p.gpus = p.gpus[:0]
	}
}

func joinInts(v []int) string {
	var b strings.Builder
	for i, n := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}

// nan marks a field absent (events.Has).
var nan = math.NaN()
