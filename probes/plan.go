package probes

import (
	"fmt"
	"sort"

	"github.com/gpuprof/gpuprof/cudaapi"
)

// Program names which BPF program a probe runs.
type Program uint8

const (
	ProgEntry   Program = iota + 1 // api_entry: saves arguments
	ProgReturn                     // api_return: emits the event
	ProgLaunch                     // launch_entry: counts
	ProgLibLoad                    // lib_load: notifies
	ProgInstant                    // api_instant: emits the event at entry
)

// callPrograms are the programs that report CUDA calls, in the order
// they are attached: a call's return probe before its entry probe (the
// mirror of closeLinks). A call entered between the two is then seen at
// neither end, and the layer under it reports it. The other way round, a
// runtime call entered once its entry probe was in but before its return
// probe was (a gap of up to ~7 ms on the dev VM) was lost, and hid the
// driver calls under it: a sync-timed loop lost a step's syncs and copy
// at the attach, and its first step was cut at the sync after the copy
// in (TestLoopShapes/c/sync/data, 2 runs in 55).
var callPrograms = []Program{ProgReturn, ProgEntry, ProgInstant}

func (p Program) String() string {
	return [...]string{"", "entry", "return", "launch-count", "lib-load", "entry-only"}[p]
}

// Probe is one entry point in one library, placed.
type Probe struct {
	API       cudaapi.API
	Symbol    Symbol
	Placement Placement
}

// Address is the file offset the probe goes at.
func (p Probe) Address() uint64 { return p.Symbol.FileOffset + p.Placement.Offset }

// Programs are the BPF programs this probe needs.
func (p Probe) Programs() []Program {
	switch p.API.Class {
	case cudaapi.ClassLaunch, cudaapi.ClassGraphLaunch:
		return []Program{ProgLaunch}
	case cudaapi.ClassLibLoad:
		return []Program{ProgLibLoad}
	case cudaapi.ClassRecord:
		// A record only enqueues: its entry is its time (api_instant).
		return []Program{ProgInstant}
	case cudaapi.ClassCopy:
		if p.API.Dir == cudaapi.DirDtoD && p.API.StreamArg != cudaapi.NoArg {
			// Likewise a device-to-device copy on a stream: the host
			// never waits for it (DDP's gradient-bucket copies).
			return []Program{ProgInstant}
		}
	}
	return []Program{ProgEntry, ProgReturn}
}

// LibraryPlan is what gpuprof would attach in one mapped file.
type LibraryPlan struct {
	PID     int
	Python  *PythonPlan // the interpreter this file holds, if any
	File    MappedFile
	Layer   cudaapi.Layer
	Probes  []Probe
	Missing []string // entry points of this layer the file does not define
}

// SingleStepped lists the probes the kernel must single-step.
func (lp LibraryPlan) SingleStepped() []Probe {
	var out []Probe
	for _, p := range lp.Probes {
		if !p.Placement.Emulated {
			out = append(out, p)
		}
	}
	return out
}

// Options select which probes a plan includes.
type Options struct {
	// Launches counts kernel launches. In a launch-bound loop even the
	// cheapest probe on every launch costs several percent (docs/facts.md §3), so
	// users of such loops can turn it off.
	Launches bool
	// NoPython leaves out the Python lock-wait probes.
	NoPython bool
	// User are functions the user named (--probe, presets).
	User []UserProbe
	// Children follows the targets' child processes (DataLoader workers,
	// torchrun ranks, engines a launcher starts), found by a poll.
	Children bool
	// NoCalls leaves out the entry/return probes on CUDA calls (syncs,
	// copies, events, memory), keeping launches and the loader hook.
	NoCalls bool
}

// PlanFile decides the probes for one mapped file. Files that are not a
// CUDA runtime, driver or the dynamic loader get an empty plan.
func PlanFile(f MappedFile, opts Options) (LibraryPlan, error) {
	lp := LibraryPlan{File: f, Layer: cudaapi.LayerOf(f.Base())}
	if lp.Layer == cudaapi.LayerNone {
		return lp, nil
	}
	wanted := map[string]cudaapi.API{}
	for _, a := range cudaapi.All() {
		if a.Layer != lp.Layer {
			continue
		}
		isLaunch := a.Class == cudaapi.ClassLaunch || a.Class == cudaapi.ClassGraphLaunch
		if (!opts.Launches && isLaunch) || (opts.NoCalls && !isLaunch && a.Layer != cudaapi.LayerLoader) {
			continue
		}
		wanted[a.Name] = a
	}
	syms, err := ReadSymbols(f.HostPath, func(name string) bool { _, ok := wanted[name]; return ok })
	if err != nil {
		return lp, fmt.Errorf("plan probes for %s: %w", f.Path, err)
	}
	seen := map[uint64]bool{}
	for _, a := range cudaapi.All() {
		name := a.Name
		if _, ok := wanted[name]; !ok {
			continue
		}
		s, ok := syms[name]
		if !ok {
			lp.Missing = append(lp.Missing, name)
			continue
		}
		p := Probe{API: a, Symbol: s, Placement: Place(s.Code)}
		if seen[p.Address()] {
			continue // an alias of a symbol already planned
		}
		seen[p.Address()] = true
		lp.Probes = append(lp.Probes, p)
	}
	sort.Strings(lp.Missing)
	return lp, nil
}
