// Package correlate turns a time-ordered stream of events into training
// steps: it finds the step boundary (or takes the one configured), cuts the
// step thread's calls into steps, and measures each: step time, compute time
// (the application's own CUDA-event readings when it takes them, otherwise
// derived from the launch and sync timeline), time blocked in syncs,
// launches, and bytes copied each way.
//
// It is pure: no I/O, no clocks, no goroutines. The same events in give the
// same steps out, which is what lets recorded traces be replayed in tests.
package correlate
