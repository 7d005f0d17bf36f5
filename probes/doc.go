// Package probes decides what to attach where in a target process and does
// it: it reads the process's mapped libraries from /proc/PID/maps, finds the
// CUDA entry points of cudaapi in their ELF symbol tables, places each probe
// on an instruction the kernel can emulate, attaches uprobe_multi links
// filtered to the process, follows libraries loaded later, and turns the ring
// buffer's records into events.
//
// Its parts, by job:
//   - planning, which needs no root: procmaps.go, elfsym.go, plan.go,
//     placement.go, userprobe.go, callsite.go, python.go (PlanPython);
//   - the session: Session (session.go) attaches to targets (scan.go,
//     children.go) and runs the event loop (run.go, drain.go, decode.go);
//     core (core.go) is what it shares with its controllers;
//   - CPython support, over pymem: cpython (cpython.go) attaches the wait
//     probes and names their frames; pycall.go and pyanchor.go time the
//     Python functions named; pool*.go read the sample pool;
//   - the controllers, each owning its state by process and seeing every
//     batch and every pass of the loop (the controller interface, run.go):
//     twinDecider (twins.go: which layer times a call both the runtime and
//     the driver see), Records (recordsites.go: event records probed at
//     their readers' call sites), Sampling (sampling.go, samplewaits.go,
//     cpuonly.go: probes attached part of the time), poolLearner
//     (poollearn.go).
//
// Close order: cancel the reader, close it, wait for it, close links, close
// the BPF objects.
package probes
