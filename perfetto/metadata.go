package perfetto

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Sort orders: processes by rank, the unranked after by PID, the GPUs
// last; in a process its steps first, the step thread next, then the
// other threads by TID, each thread's overlaps lanes just after it.
const (
	unrankedSort = 1 << 24
	gpuSort      = 1 << 30
	stepSort     = 1 << 4
	threadSort   = 1 << 5
)

// metadata builds the names and sort order of every process and thread
// that has something in the file, in w.ev.
func (w *Writer) metadata() {
	for _, pid := range slices.Sorted(maps.Keys(w.procs)) {
		p := w.procs[pid]
		if !p.drawn() {
			continue
		}
		name := fmt.Sprintf("PID %d", pid)
		sort := unrankedSort + int64(pid)
		if p.ranked {
			name = fmt.Sprintf("rank %d · PID %d", p.rank, pid)
			sort = int64(p.rank)
		}
		w.processMeta(pid, name, sort)
		steps := "steps (thread " + joinTIDs(p.stepTIDs) + ")"
		for i, t := range p.steps {
			if t.drawn() {
				w.threadMeta(pid, t.tid, laneName(steps, i), int64(i))
			}
		}
		for _, tid := range slices.Sorted(maps.Keys(p.threads)) {
			th := p.threads[tid]
			name := fmt.Sprintf("thread %d", tid)
			if th.name != "" {
				name = fmt.Sprintf("%s (%d)", th.name, tid)
			}
			sort := threadSort + int64(tid)*(maxLanes+1)
			if p.isStepThread(tid) {
				name += ", step thread"
				sort = stepSort
			}
			for i, t := range th.lanes {
				if !t.drawn() {
					continue
				}
				if i == 0 {
					w.threadMeta(pid, t.tid, name, sort)
					continue
				}
				w.threadMeta(pid, t.tid, laneName(fmt.Sprintf("thread %d", tid), i), sort+int64(i))
			}
		}
	}
	if w.gpus {
		w.processMeta(gpuPID, "GPUs (NVML)", gpuSort)
	}
}

// laneName names lane i of a track named name: the track itself, then
// "name (overlaps)", "name (overlaps 2)" ...
func laneName(name string, i int) string {
	switch i {
	case 0:
		return name
	case 1:
		return name + " (overlaps)"
	}
	return fmt.Sprintf("%s (overlaps %d)", name, i)
}

func joinTIDs(tids []uint32) string {
	s := make([]string, len(tids))
	for i, t := range tids {
		s[i] = fmt.Sprint(t)
	}
	return strings.Join(s, ", ")
}

// processMeta names a process and places it; tid is the pid, the main
// thread's, which Perfetto's importer finds the process by.
func (w *Writer) processMeta(pid uint32, name string, sort int64) {
	w.meta("process_name", pid, pid, "name", name, 0)
	w.meta("process_sort_index", pid, pid, "sort_index", "", sort)
}

func (w *Writer) threadMeta(pid, tid uint32, name string, sort int64) {
	w.meta("thread_name", pid, tid, "name", name, 0)
	w.meta("thread_sort_index", pid, tid, "sort_index", "", sort)
}

// meta adds one metadata event: its one arg the string s where key is
// "name", else the number n.
func (w *Writer) meta(what string, pid, tid uint32, key, s string, n int64) {
	e := &w.ev
	e.begin('M')
	e.strField("name", what)
	e.uintField("pid", uint64(pid))
	e.uintField("tid", uint64(tid))
	e.args()
	if key == "name" {
		e.strArg(key, s)
	} else {
		e.arg(key)
		e.b = strconv.AppendInt(e.b, n, 10)
	}
	e.endArgs()
	e.end()
}

// cutNote marks where the bound stopped the file: a global instant at
// AtNS, in w.ev with the closing metadata.
func (w *Writer) cutNote() {
	at := max(w.stats.AtNS, w.origin)
	e := &w.ev
	e.begin('i')
	e.strField("s", "g")
	e.strField("name", fmt.Sprintf("trace cut: its %d bytes reached, nothing after this written", w.max))
	e.uintField("pid", 0)
	e.uintField("tid", 0)
	e.usField("ts", at-w.origin)
	e.end()
}
