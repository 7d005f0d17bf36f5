package control

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/events"
)

// The traces were recorded with every launch counted until the steps were
// found. sampledProbes replays them as the probes would have seen them
// under LearnLaunches and SampleLaunches: it switches each process's
// launch counting on event time as probes/sampling.go's sampler does
// (learning phases doubling each cycle, the on phase the loop told it of
// ending at once), with the markers the probes send, and takes out of
// each call the launches made while the process's launch probes were
// off, and out of the trace the Python waits and kernel lookups
// reported while their probes went with them (learning: until its
// boundary is found).
type sampledProbes struct {
	*fakeProbes
	now      uint64 // the end of the event being added
	simulate bool   // switch launch counting (else replay the recorded switches)
	samplers map[int]*simSampler
	found    map[int]uint64 // when each process's step thread was told
}

func (p *sampledProbes) SetStepThread(pid int, tid uint32) {
	p.fakeProbes.SetStepThread(pid, tid)
	if p.found[pid] == 0 {
		p.found[pid] = p.now
	}
}

// simSampler is probes' launchSampler, on event time.
type simSampler struct {
	learning, ending, off bool
	waitsResumed          bool // the marker of the waits attached again is due (SampleLaunches while learning)
	period, on            time.Duration
	since                 uint64
	lastOn                uint64            // when counting last went on
	prevEnd               map[uint32]uint64 // each thread's last call's end
}

func (p *sampledProbes) LearnLaunches(pid int, period, on time.Duration) {
	p.fakeProbes.LearnLaunches(pid, period, on)
	if p.simulate && p.samplers[pid] == nil && on < period {
		p.samplers[pid] = &simSampler{learning: true, period: period, on: on, since: p.now - uint64(on), prevEnd: map[uint32]uint64{}}
	}
}

func (p *sampledProbes) SampleLaunches(pid int, period, on time.Duration) {
	p.fakeProbes.SampleLaunches(pid, period, on)
	s := p.samplers[pid]
	switch {
	case !p.simulate:
	case on >= period:
		if s != nil && s.learning {
			s.learning, s.ending, s.waitsResumed = false, true, true
		}
	case s != nil && s.learning:
		s.learning, s.period, s.on, s.waitsResumed = false, period, on, true
	case s == nil:
		p.samplers[pid] = &simSampler{period: period, on: on, since: p.now, prevEnd: map[uint32]uint64{}}
	}
}

// switches returns the markers of the switches due by t.
func (s *simSampler) switches(pid uint32, t uint64) []events.Event {
	var out []events.Event
	if s.waitsResumed {
		s.waitsResumed = false
		mark := events.Event{Kind: events.KindLaunchProbes, PID: pid, Start: t, End: t}
		if !s.off {
			mark.Out = 1
		}
		out = append(out, mark)
	}
	for {
		if s.ending {
			s.ending = false
			if s.off {
				s.off, s.lastOn, s.period = false, t, 0
				out = append(out, events.Event{Kind: events.KindLaunchProbes, PID: pid, Start: t, End: t, Out: 1})
			}
			s.on = 0 // stays on
		}
		if s.on == 0 {
			return out
		}
		phase := s.on
		if s.off {
			phase = s.period - s.on
		}
		at := s.since + uint64(phase)
		if at > t {
			return out
		}
		s.since, s.off = at, !s.off
		mark := events.Event{Kind: events.KindLaunchProbes, PID: pid, Start: at, End: at}
		if s.learning {
			mark.Args[0] = 1 // the waits go with them
		}
		if !s.off {
			mark.Out, s.lastOn = 1, at
			if s.learning {
				on := min(2*s.on, maxLaunchOn)
				s.period = time.Duration(float64(s.period) * float64(on) / float64(s.on))
				s.on = on
			}
		}
		out = append(out, mark)
	}
}

// count takes out of e the launches made while its process's launch
// probes were off: all of them where they are off now, the share of the
// time since its thread's last call that they were off where they went on
// since.
func (s *simSampler) count(e *events.Event) {
	if e.Kind != events.KindCall {
		return
	}
	prev := s.prevEnd[e.TID]
	s.prevEnd[e.TID] = e.End
	switch {
	case s.off:
		e.Launches, e.GraphLaunches = 0, 0
	case prev < s.lastOn && e.Start > prev:
		share := float64(e.Start-s.lastOn) / float64(e.Start-prev)
		e.Launches = uint32(float64(e.Launches) * share)
		e.GraphLaunches = uint32(float64(e.GraphLaunches) * share)
	}
}

// thinnedWhenRecorded says whether pid's launch counting was switched
// before its steps were found (found) in the recorded run: its launch
// counts are thinned already, and there is nothing to simulate.
func thinnedWhenRecorded(tr recorded, pid uint32, found uint64) bool {
	for _, e := range tr.evs {
		if e.End > found {
			return false
		}
		if e.Kind == events.KindLaunchProbes && e.PID == pid {
			return true
		}
	}
	return false
}

// maxLaunchOn is probes' bound on a phase.
const maxLaunchOn = 2 * time.Minute

// replaySampled replays tr through a loop steering sampledProbes; simulate
// false replays the recorded switches instead.
func replaySampled(t *testing.T, tr recorded, cfg Config, simulate bool) (*Loop, *sampledProbes) {
	t.Helper()
	p := &sampledProbes{fakeProbes: &fakeProbes{}, simulate: simulate, samplers: map[int]*simSampler{}, found: map[int]uint64{}}
	l, err := New(cfg, p, p.fakeProbes)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tr.evs {
		if e.Kind == events.KindLaunchProbes && simulate {
			continue // the recorded run's own switches: the simulation makes them
		}
		for _, pid := range slices.Sorted(func(yield func(int) bool) {
			for pid := range p.samplers {
				if !yield(pid) {
					return
				}
			}
		}) {
			for _, m := range p.samplers[pid].switches(uint32(pid), e.End) {
				p.now = m.End
				l.Add(&m)
			}
		}
		if s := p.samplers[int(e.PID)]; s != nil {
			if s.learning && s.off && isPhasedReport(&e) {
				continue // its wait probes were off
			}
			s.count(&e)
		}
		p.now = e.End
		l.Add(&e)
	}
	l.Finish()
	return l, p
}

// TestReplayLearnsFromSampledLaunches replays every trace with launch
// counting thinned while the steps are learned, as attach thins it: each
// process whose boundary the full replay found gets the same boundary on
// the same thread, and its steps end where the full replay's end.
func TestReplayLearnsFromSampledLaunches(t *testing.T) {
	thinned := 0
	for _, tr := range traces(t) {
		cfg := configFor(t, tr)
		full, ff := replay(t, tr, cfg, true)
		sampled, sp := replaySampled(t, tr, cfg, true)
		sf := sp.fakeProbes
		every := cfg
		every.LearnBudget = 1
		_, ep := replaySampled(t, tr, every, false)
		for _, pid := range full.PIDs() {
			want, ok := full.procs[pid].corr.Boundary()
			if !ok || want.TID == 0 || len(sf.of("learn", int(pid))) == 0 || thinnedWhenRecorded(tr, pid, ep.found[int(pid)]) {
				continue
			}
			thinned++
			name := fmt.Sprintf("%s: PID %d", tr.name, pid)
			got, ok := sampled.procs[pid].corr.Boundary()
			if !ok || got.TID != want.TID || got.Calls != want.Calls {
				t.Errorf("%s: boundary %s on %d with launches thinned, %s on %d with all counted", name, got.Calls, got.TID, want.Calls, want.TID)
				continue
			}
			// The steps from where the thinned replay found its boundary:
			// one found later (at most 3 s, below) cuts fewer of the steps
			// before from what it buffered (of those in its learning's off
			// phases, none).
			from := sp.found[int(pid)]
			ends := map[uint64]bool{}
			var n int
			for _, s := range sf.steps {
				if s.PID == pid && s.EndNS >= from {
					ends[s.EndNS] = true
					n++
				}
			}
			wantN, matched := 0, 0
			for _, s := range ff.steps {
				if s.PID == pid && s.EndNS >= from {
					wantN++
					if ends[s.EndNS] {
						matched++
					}
				}
			}
			if float64(matched) < 0.97*float64(wantN) || n > wantN+wantN/50+1 {
				t.Errorf("%s: %d steps with launches thinned, %d of the %d with all counted end alike", name, n, matched, wantN)
			}
			// Those it cut before, from what it buffered, are the full
			// replay's steps too.
			fullEnds := map[uint64]bool{}
			for _, s := range ff.steps {
				if s.PID == pid {
					fullEnds[s.EndNS] = true
				}
			}
			early, alike := 0, 0
			for _, s := range sf.steps {
				if s.PID == pid && s.EndNS < from {
					early++
					if fullEnds[s.EndNS] {
						alike++
					}
				}
			}
			if float64(alike) < 0.97*float64(early) {
				t.Errorf("%s: %d of the %d steps cut from the buffer before the boundary was found end as with all counted", name, alike, early)
			}
			if late := float64(sp.found[int(pid)]) - float64(ep.found[int(pid)]); late > 3e9 {
				t.Errorf("%s: boundary found %.1f s later with launches thinned", name, late/1e9)
			}
			first := tr.evs[slices.IndexFunc(tr.evs, func(e events.Event) bool { return e.PID == pid })].End
			t.Logf("%s: %s, found %.1f s in (%.1f s with every launch counted); %d of %d steps alike, and %d of the %d cut from the buffer", name, got.Calls,
				float64(sp.found[int(pid)]-first)/1e9, float64(ep.found[int(pid)]-first)/1e9, matched, wantN, alike, early)
		}
	}
	if thinned == 0 {
		t.Fatal("no trace's learning was thinned")
	}
}
