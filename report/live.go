package report

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
)

// Live shows one line per step: rewritten in place on a terminal, at most
// once a second otherwise (so logs stay readable).
type Live struct {
	w       io.Writer
	tty     bool
	last    time.Time
	lastLen int
	windows map[uint32][]uint64 // recent step ends by process, for its step rate
	trainer bool                // a process's steps took samples: engines' steps are not shown
	engines map[uint32]bool     // processes whose steps take no samples: their rates are I
	// pending is the latest step not shown yet (not a terminal), formatted
	// only when a line is due: at 100-600 steps a second, formatting every
	// step was most of the live view's cost.
	pending    correlate.Step
	pendRate   float64
	hasPending bool
	Interval   time.Duration // minimum time between lines when not a terminal
	ShowPID    bool          // several processes: say whose step each line is
	// Notes, where set, takes the notes instead of w: a full-screen
	// view (gpuprof top) shows them in itself.
	Notes func(msg string)
}

// NewLive writes to w; tty says whether w is a terminal.
func NewLive(w io.Writer, tty bool) *Live {
	return &Live{w: w, tty: tty, Interval: time.Second, windows: map[uint32][]uint64{}, engines: map[uint32]bool{}}
}

// Line formats a step like the seed's progress bar:
//
//	step 812 | step 18.6ms data 15.1ms compute 2.91ms (events) sync 2.1ms wait 0 | 51 launches h2d 16.0MiB d2h 4B | 53.7 steps/s
func Line(s correlate.Step, rate float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "step %d | step %s", s.Index, Duration(s.StepTime))
	if s.DataMeasured {
		// ~: estimated from the latest step whose launches were counted.
		approx := ""
		if s.DataSource == correlate.DataCalibrated {
			approx = "~"
		}
		fmt.Fprintf(&b, " data %s%s", approx, Duration(s.DataTime))
	}
	switch s.ComputeSource {
	case correlate.ComputeEvents:
		fmt.Fprintf(&b, " compute %s (events)", Duration(s.ComputeTime))
	case correlate.ComputeDerived:
		fmt.Fprintf(&b, " compute %s (derived)", Duration(s.ComputeTime))
	}
	fmt.Fprintf(&b, " sync %s", Duration(s.SyncTime))
	if s.WaitsObserved {
		fmt.Fprintf(&b, " wait %s", Duration(s.DispatchWait))
	}
	if s.FetchCalls > 0 {
		fmt.Fprintf(&b, " fetch %s", Duration(s.FetchTime))
	}
	if s.Thru > 0 {
		fmt.Fprintf(&b, " thru=%.1f T=%.1f", s.Thru, s.TrainCapacity)
	}
	if s.InferCapacity > 0 {
		fmt.Fprintf(&b, " I=%.1f/s", s.InferCapacity)
	}
	if s.PoolMeasured {
		fmt.Fprintf(&b, " pool=%d", s.Pool)
	}
	b.WriteString(" |")
	if s.LaunchesCounted {
		fmt.Fprintf(&b, " %d launches", s.Launches+s.GraphLaunches)
		if s.GraphLaunches > 0 && s.GraphKernelsKnown {
			fmt.Fprintf(&b, " (%d graph kernels)", s.GraphKernels)
		}
	}
	if s.H2DBytes > 0 {
		fmt.Fprintf(&b, " h2d %s", Bytes(float64(s.H2DBytes)))
	}
	if s.D2HBytes > 0 {
		fmt.Fprintf(&b, " d2h %s", Bytes(float64(s.D2HBytes)))
	}
	if g := s.GPU; g != nil {
		b.WriteString(" | gpu")
		if events.Has(g.Util) {
			fmt.Fprintf(&b, " %.0f%%", g.Util)
		}
		if events.Has(g.SMActive) {
			fmt.Fprintf(&b, " sm %.2f", g.SMActive)
		}
		if events.Has(g.PowerW) {
			fmt.Fprintf(&b, " %.0fW", g.PowerW)
		}
		if g.Throttle != 0 {
			b.WriteString(" throttled")
		}
	}
	if rate > 0 {
		fmt.Fprintf(&b, " | %.1f steps/s", rate)
	}
	return b.String()
}

// Step shows a new step. Each process has its own step rate. Once some
// process's steps take samples from the pool, steps that take none (an
// engine process's iterations) are not shown: the line follows training.
func (l *Live) Step(s correlate.Step) {
	win := append(l.windows[s.PID], s.EndNS)
	if len(win) > 20 {
		win = win[1:]
	}
	l.windows[s.PID] = win
	rate := 0.0
	if n := len(win); n > 1 {
		rate = float64(n-1) / (float64(win[n-1]-win[0]) / 1e9)
	}
	if s.SamplesMeasured && s.Samples > 0 {
		l.trainer = true
	} else if s.SamplesMeasured {
		l.engines[s.PID] = true
		if l.trainer {
			return
		}
	}
	if s.InferCapacity == 0 && !l.engines[s.PID] {
		// The engine processes' iterations a second, together.
		for pid := range l.engines {
			if w := l.windows[pid]; len(w) > 1 {
				s.InferCapacity += float64(len(w)-1) / (float64(w[len(w)-1]-w[0]) / 1e9)
			}
		}
	}
	if l.w == io.Discard {
		return // --quiet: no line to show, none to format
	}
	now := time.Now()
	if !l.tty {
		l.pending, l.pendRate, l.hasPending = s, rate, true
		if now.Sub(l.last) < l.Interval {
			return
		}
		fmt.Fprintln(l.w, l.line(s, rate))
		l.hasPending, l.last = false, now
		return
	}
	line := l.line(s, rate)
	fmt.Fprintf(l.w, "\r%s\x1b[K", line)
	l.lastLen = len(line)
}

// line is a step's line, with its rank or process where several show.
func (l *Live) line(s correlate.Step, rate float64) string {
	line := Line(s, rate)
	switch {
	case s.Rank != nil:
		line = fmt.Sprintf("rank %d %s", *s.Rank, line)
	case l.ShowPID:
		line = fmt.Sprintf("PID %d %s", s.PID, line)
	}
	return line
}

// Note prints a message without disturbing the live line.
func (l *Live) Note(msg string) {
	if l.Notes != nil {
		l.Notes(msg)
		return
	}
	if l.tty && l.lastLen > 0 {
		fmt.Fprintf(l.w, "\r\x1b[K%s\n", msg)
		l.lastLen = 0
		return
	}
	fmt.Fprintln(l.w, msg)
}

// End finishes the live line so later output starts on a fresh line.
func (l *Live) End() {
	if l.tty && l.lastLen > 0 {
		fmt.Fprintln(l.w)
		l.lastLen = 0
	}
	if !l.tty && l.hasPending {
		fmt.Fprintln(l.w, l.line(l.pending, l.pendRate))
		l.hasPending = false
	}
}
