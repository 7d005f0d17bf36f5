package correlate

import (
	"fmt"
	"slices"

	"github.com/gpuprof/gpuprof/events"
)

// Workers are the threads of a job, in any of its processes, that share
// one kind of work: inference engines running GPU loops of their own, or
// threads calling the same --probe function of a worker's role (infer,
// data, fetch). Their balance is each one's calls and time a call, and the
// slowest one against the median: one slow engine or loader worker holds
// back whatever waits on all of them.

// workerRoles are the --probe roles whose calls are one worker's unit of
// work. A dispatch wait or a step is the trainer's, not a worker's.
var workerRoles = map[events.Role]bool{events.RoleInfer: true, events.RoleData: true, events.RoleFetch: true}

// Worker is one thread's share of a kind of work.
type Worker struct {
	PID, TID uint32
	Calls    int     // calls, or engine iterations
	Mean     float64 // seconds a call (an engine's median iteration)
}

// WorkerGroup is the threads doing one kind of work.
type WorkerGroup struct {
	What    string // "engine GPU loop", or the function and its role
	Workers []Worker
	Median  float64 // the workers' median time a call
	Slowest Worker
	Skew    float64 // the slowest worker's time a call over the median, less 1
}

// Workers groups the job's workers by kind of work; only kinds done by at
// least two threads are returned, slowest skew first.
func Workers(runs []ProcessRun) []WorkerGroup {
	byWhat := map[string][]Worker{}
	for _, r := range runs {
		for _, e := range r.Run.Engines {
			if e.Iterations > 0 {
				byWhat["engine GPU loop"] = append(byWhat["engine GPU loop"], Worker{e.PID, e.TID, e.Iterations, e.Busy.P50})
			}
		}
		for _, u := range r.Run.UserThreads {
			if workerRoles[u.Role] && u.Calls > 0 {
				what := fmt.Sprintf("%s (%s)", u.Name, u.Role)
				byWhat[what] = append(byWhat[what], Worker{u.PID, u.TID, u.Calls, u.Seconds / float64(u.Calls)})
			}
		}
	}
	var out []WorkerGroup
	for what, ws := range byWhat {
		if len(ws) < 2 {
			continue
		}
		slices.SortFunc(ws, func(a, b Worker) int {
			if a.PID != b.PID {
				return int(a.PID) - int(b.PID)
			}
			return int(a.TID) - int(b.TID)
		})
		means := make([]float64, len(ws))
		for i, w := range ws {
			means[i] = w.Mean
		}
		g := WorkerGroup{What: what, Workers: ws, Median: median(means)}
		for _, w := range ws {
			if w.Mean > g.Slowest.Mean {
				g.Slowest = w
			}
		}
		if g.Median > 0 {
			g.Skew = g.Slowest.Mean/g.Median - 1
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b WorkerGroup) int {
		switch {
		case a.Skew > b.Skew:
			return -1
		case a.Skew < b.Skew:
			return 1
		}
		return 0
	})
	return out
}

// median is the middle value, or the mean of the two middle ones.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
