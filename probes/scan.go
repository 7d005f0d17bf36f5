package probes

import (
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/gpuprof/gpuprof/cudaapi"
)

// scan reads pid's maps and attaches to every CUDA or loader file not yet
// attached. It returns the plans it attached.
func (s *Session) scan(t *target) ([]LibraryPlan, error) {
	t.lastScan = time.Now()
	files, err := ExecutableFiles(s.cfg.ProcRoot, t.pid)
	if err != nil {
		if _, statErr := os.Stat(fmt.Sprintf("%s/%d", s.cfg.ProcRoot, t.pid)); statErr != nil {
			return nil, NoProcessError{t.pid}
		}
		return nil, err
	}
	var added []LibraryPlan
	for _, f := range files {
		python := t.python == nil && isPythonFile(f.Base())
		libc := t.sems == nil && IsLibc(f.Base())
		user := s.userFile(f)
		if !python && !libc && !user && cudaapi.LayerOf(f.Base()) == cudaapi.LayerNone {
			continue
		}
		s.mu.Lock()
		_, done := t.libs[f.Key()]
		s.mu.Unlock()
		if done {
			continue
		}
		if f.Unreachable {
			return added, f.unreachableError(t.pid)
		}
		if user && cudaapi.LayerOf(f.Base()) == cudaapi.LayerNone {
			lp, err := s.scanUser(t, f)
			if err != nil {
				return added, err
			}
			if lp != nil {
				added = append(added, *lp)
			}
			continue
		}
		if python || libc {
			if err := s.python.scanFile(t, f, python); err != nil {
				return added, err
			}
			continue
		}
		lp, err := PlanFile(f, s.cfg.Options)
		if err != nil {
			return added, err
		}
		lp.PID = t.pid
		calls, _ := splitSampled(lp, s.cfg.Launches)
		rest, twins := splitTwins(calls)
		links, err := attachPrograms(s.objs, t.pid, rest, slices.Concat(callPrograms, []Program{ProgLibLoad})...)
		if err != nil {
			return added, err
		}
		lib := &attachedLib{plan: lp, links: links}
		if err := s.twins.attach(t, lib, twins); err != nil {
			return added, err
		}
		if s.sampling.launchesOn(t) {
			if lib.launch, err = s.sampling.attachSampled(t.pid, lp); err != nil {
				lib.close()
				return added, err
			}
		}
		cuda := lp.Layer == cudaapi.LayerRuntime || lp.Layer == cudaapi.LayerDriver
		s.mu.Lock()
		t.libs[f.Key()] = lib
		t.cudaReady = t.cudaReady || cuda
		s.mu.Unlock()
		if cuda {
			s.sampling.endCPUOnly(t)
		}
		added = append(added, lp)
		s.cfg.Log.Debug("attached", "pid", t.pid, "file", f.Path, "probes", len(lp.Probes))
	}
	if lp, err := s.python.attachWaits(t); err != nil {
		return added, err
	} else if lp != nil {
		added = append(added, *lp)
	}
	s.python.watchCalls(t)
	return added, nil
}

// userFile says whether a user-named probe may be in f.
func (s *Session) userFile(f MappedFile) bool {
	for _, u := range s.cfg.User {
		if u.matchesFile(f) {
			return true
		}
	}
	return false
}

// scanUser attaches the user-named probes found in f.
func (s *Session) scanUser(t *target, f MappedFile) (*LibraryPlan, error) {
	probes, err := PlanUserProbes(f, s.cfg.User)
	if err != nil {
		return nil, err
	}
	lp := LibraryPlan{PID: t.pid, File: f, Layer: cudaapi.LayerUser, Probes: probes}
	lib := &attachedLib{plan: lp}
	if len(probes) > 0 {
		if lib.links, err = attachPrograms(s.objs, t.pid, lp, callPrograms...); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	t.libs[f.Key()] = lib
	s.mu.Unlock()
	if len(probes) == 0 {
		return nil, nil
	}
	return &lp, nil
}

func (s *Session) rescan(force bool) []LibraryPlan {
	var added []LibraryPlan
	s.mu.Lock()
	ts := make([]*target, 0, len(s.targets))
	for _, t := range s.targets {
		ts = append(ts, t)
	}
	s.mu.Unlock()
	for _, t := range ts {
		if t.exited || (!force && time.Since(t.lastScan) < s.cfg.Rescan) {
			continue
		}
		var plans []LibraryPlan
		var err error
		if s.execed(t) {
			plans, err = s.reattach(t)
		} else {
			plans, err = s.scan(t)
		}
		if err != nil && !t.exited {
			// A process that exited since the last poll (a DataLoader
			// worker at the end of an epoch) is no failure to report.
			s.mu.Lock()
			gone := exitedWithin(t, 0)
			t.exited = t.exited || gone
			s.mu.Unlock()
			if !gone {
				s.cfg.Log.Warn("rescan failed", "pid", t.pid, "err", err)
			}
		}
		added = append(added, plans...)
	}
	return added
}
