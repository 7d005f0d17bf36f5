// Package probes decides what to attach where in a target process and does
// it: it reads the process's mapped libraries from /proc/PID/maps, finds the
// CUDA entry points of cudaapi in their ELF symbol tables, places each probe
// on an instruction the kernel can emulate, attaches uprobe_multi links
// filtered to the process, follows libraries loaded later, and turns the ring
// buffer's records into events.
//
// Close order: cancel the reader, close it, wait for it, close links, close
// the BPF objects.
package probes
