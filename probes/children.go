package probes

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// followChildren attaches to the targets' new child processes, every
// Rescan interval: a training launcher's ranks, DataLoader workers, engines.
// Grandchildren are found at the next round, once their parent is a target.
func (s *Session) followChildren() []LibraryPlan {
	if !s.cfg.Children || time.Since(s.lastChildren) < s.cfg.Rescan {
		return nil
	}
	s.lastChildren = time.Now()
	s.mu.Lock()
	var parents []int
	for pid, t := range s.targets {
		if !t.exited {
			parents = append(parents, pid)
		}
	}
	s.mu.Unlock()
	var added []LibraryPlan
	for _, parent := range parents {
		for _, child := range Children(s.cfg.ProcRoot, parent) {
			added = append(added, s.attachNew(child, "parent", parent)...)
		}
	}
	return added
}

// attachNew attaches to pid unless it is a target already; why says, for
// the log, how it was found.
func (s *Session) attachNew(pid int, why ...any) []LibraryPlan {
	s.mu.Lock()
	_, known := s.targets[pid]
	s.mu.Unlock()
	if known {
		return nil
	}
	plans, err := s.Attach(pid)
	if err != nil {
		s.cfg.Log.Debug("not following", append([]any{"pid", pid, "err", err}, why...)...)
		return nil
	}
	s.cfg.Log.Debug("following", append([]any{"pid", pid}, why...)...)
	return plans
}

// Follow asks Run to attach to pid at its next poll, if it is not a target
// yet: a process found by other means while the session runs (one that
// opened a context on a GPU gpuprof attach --gpus watches). Safe to call
// from any goroutine.
func (s *Session) Follow(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, known := s.targets[pid]; !known && !slices.Contains(s.follow, pid) {
		s.follow = append(s.follow, pid)
	}
}

// followNamed attaches to the processes Follow named.
func (s *Session) followNamed() []LibraryPlan {
	s.mu.Lock()
	pids := s.follow
	s.follow = nil
	s.mu.Unlock()
	var added []LibraryPlan
	for _, pid := range pids {
		added = append(added, s.attachNew(pid, "found", "named")...)
	}
	return added
}

// Children lists a process's child processes, from each of its threads'
// children file.
func Children(procRoot string, pid int) []int {
	tasks, _ := filepath.Glob(filepath.Join(procRoot, strconv.Itoa(pid), "task", "*", "children"))
	var out []int
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// PIDs lists the processes followed.
func (s *Session) PIDs() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int, 0, len(s.targets))
	for pid := range s.targets {
		out = append(out, pid)
	}
	return out
}
