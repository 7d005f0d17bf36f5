package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/internal/watchpoint"
	"github.com/gpuprof/gpuprof/probes"
)

// probesCmd shows what attach would put where in a process, and why not.
func probesCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("probes", stderr)
	pid := fs.IntP("pid", "p", 0, "the process to inspect")
	noLaunches := fs.Bool("no-launches", false, "leave out the launch-counting probes, as attach --no-launches does")
	specs := fs.StringArray("probe", nil, "also show where these --probe functions would be probed, and at what cost (as attach --probe)")
	preset := fs.String("preset", "", "also show the probes of a kind of job (as attach --preset): "+presetNames())
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *pid <= 0 {
		return usageErr("probes needs --pid PID")
	}
	user, _, err := userProbes(*preset, *specs)
	if err != nil {
		return err
	}
	// Only read, not attached to: any user's, any container's, but no
	// kernel thread, zombie or init.
	if _, err := probes.LookupTarget("/proc", *pid, probes.TargetPolicy{OtherUser: true, OtherContainer: true}); err != nil {
		return err
	}
	files, err := probes.ExecutableFiles("/proc", *pid)
	if err != nil {
		if _, statErr := os.Stat(fmt.Sprintf("/proc/%d", *pid)); statErr != nil {
			return fmt.Errorf("no process with PID %d: check it with ps -p %d", *pid, *pid)
		}
		return fmt.Errorf("%w: run as root to read another user's process", err)
	}
	cuda := 0
	for _, f := range files {
		if p, err := probes.PlanPython("/proc", *pid, f); err == nil && p != nil {
			writePython(stdout, p)
			writePythonCalls(stdout, *pid, p, user)
		}
		if probes.IsLibc(f.Base()) {
			if sp, err := probes.PlanSemaphores(f); err == nil {
				writeSemaphores(stdout, sp)
			}
		}
		if ps, err := probes.PlanUserProbes(f, user); err == nil && len(ps) > 0 {
			writePlan(stdout, probes.LibraryPlan{PID: *pid, File: f, Layer: cudaapi.LayerUser, Probes: ps})
		}
		layer := cudaapi.LayerOf(f.Base())
		if layer == cudaapi.LayerNone {
			continue
		}
		lp, err := probes.PlanFile(f, probes.Options{Launches: !*noLaunches})
		if err != nil {
			return err
		}
		if layer != cudaapi.LayerLoader {
			cuda++
		}
		writePlan(stdout, lp)
	}
	fmt.Fprintln(stdout, "Kernel launches are counted at the driver layer only: every runtime launch reaches cuLaunchKernel, so one probe per launch counts each once.")
	fmt.Fprintln(stdout, "Copies, syncs and event calls are probed at both layers until the process's calls show which layer sees them all: the runtime's probes go once every runtime call of the kind was seen reaching the driver (copies with their direction), the driver's once at most 1 in 100 calls go straight to it.")
	fmt.Fprintln(stdout, "A single-stepped probe costs ~5-14 µs a hit instead of ~0.3-0.9 µs (the kernel cannot emulate its first instruction).")
	if cuda == 0 {
		return fmt.Errorf("PID %d has not loaded a CUDA library (libcudart.so* or libcuda.so.1) yet; gpuprof attach waits for one", *pid)
	}
	return nil
}

func writePlan(w io.Writer, lp probes.LibraryPlan) {
	fmt.Fprintf(w, "%s (%s layer): %d probes\n", lp.File.Path, lp.Layer, len(lp.Probes))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  symbol\tclass\tfile offset\tprobe at\tprograms")
	for _, p := range lp.Probes {
		progs := ""
		for i, pr := range p.Programs() {
			if i > 0 {
				progs += "+"
			}
			progs += pr.String()
		}
		fmt.Fprintf(tw, "  %s\t%s\t%#x\t%s\t%s\n", p.API.Name, p.API.Class, p.Address(), p.Placement, progs)
	}
	tw.Flush()
	if len(lp.Missing) > 0 {
		fmt.Fprintf(w, "  not in this library (not attached): %v\n", lp.Missing)
	}
}

func writePython(w io.Writer, p *probes.PythonPlan) {
	if p.Err != nil {
		fmt.Fprintf(w, "%s: Python 3.%d, waits not timed: %v\n", p.File.Path, p.Minor, p.Err)
		return
	}
	fmt.Fprintf(w, "%s: Python 3.%d (_PyRuntime at %#x): its waits are timed at libc's semaphore waits, frames read when a wait ends\n",
		p.File.Path, p.Minor, p.Runtime)
	if p.Read != nil {
		fmt.Fprintf(w, "  %s\t%#x\t%s\tentry+return, every Python-level read: a wait when it blocks\n", p.Read.Symbol.Name, p.Read.Address(), p.Read.Placement)
	}
	if p.Write != nil {
		fmt.Fprintf(w, "  %s\t%#x\t%s\tentry, every Python-level write: where a loop's logging of a step ends\n", p.Write.Symbol.Name, p.Write.Address(), p.Write.Placement)
	}
}

func writeSemaphores(w io.Writer, sp probes.SemaphorePlan) {
	fmt.Fprintf(w, "%s (Python waits, in processes running CPython):\n", sp.File.Path)
	for _, p := range sp.Probes {
		fmt.Fprintf(w, "  %s\t%#x\t%s\tentry+return\n", p.Symbol.Name, p.Address(), p.Placement)
	}
	for _, p := range sp.GIL {
		fmt.Fprintf(w, "  %s\t%#x\t%s\tentry+return, taking the GIL back after a wait\n", p.Symbol.Name, p.Address(), p.Placement)
	}
}

// writePythonCalls shows where the Python functions named would be
// watched, and what that costs a call.
func writePythonCalls(w io.Writer, pid int, p *probes.PythonPlan, user []probes.UserProbe) {
	for _, u := range user {
		module, qualname, ok := u.Python()
		if !ok {
			continue
		}
		fn, err := probes.FindPythonFunction(pid, p, module, qualname)
		if err != nil {
			fmt.Fprintf(w, "  %s: not found now: %v\n", u.Spec(), err)
			continue
		}
		if anchors := probes.NativeAnchors(module, qualname); anchors != nil {
			fmt.Fprintf(w, "  %s: uprobes on the C functions it calls first (%s) and last (%s), found in the job's memory when attached; watchpoints where those are not found: on its start (%#x) and %d return(s) (%s)\n",
				u.Spec(), strings.Join(anchors[:len(anchors)-1], ", "), anchors[len(anchors)-1], fn.Entry, len(fn.Returns), hexList(fn.Returns))
			continue
		}
		if err := watchpoint.Fires(); err != nil {
			fmt.Fprintf(w, "  %s: not timed here: %v\n", u.Spec(), err)
			continue
		}
		fmt.Fprintf(w, "  %s: hardware watchpoints on its start (%#x) and %d return(s) (%s): two debug traps every call, ~20-35 µs a call on a VM (make bench: BenchmarkPythonCallProbe)\n",
			u.Spec(), fn.Entry, len(fn.Returns), hexList(fn.Returns))
	}
}

func hexList(addrs []uint64) string {
	var b strings.Builder
	for i, a := range addrs {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%#x", a)
	}
	return b.String()
}
