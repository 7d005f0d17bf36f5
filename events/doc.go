// Package events holds what the probes saw, as plain Go values: one Event
// per completed CUDA call (launches ride along as counts), kernel names as
// modules are loaded, and notices that the loader changed the process's
// libraries. probes/ produces them, correlate/ consumes them, and traces
// written to disk are sequences of them.
package events
