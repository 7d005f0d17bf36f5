// Package profiles turns a job's stack samples and steps into pprof
// profiles, one per process, profile type and window, for Pyroscope:
// on-CPU time (cpu), blocked time (wait) and GPU time and kernel launches
// (gpu) by Python and native stack, each sample labelled with the phase of
// the step it fell in (correlate.Step.Phases) and the step as span_id.
//
// Samples come before the step that holds them is cut, so a Builder folds
// each sample into its window at once, by stack, and labels it once its
// step is known (or, past a lag bound, as outside any step). It keeps no
// events, and bounds each window's stacks and samples. docs/profiles.md
// says what each profile holds and how GPU time by stack is estimated.
//
// Files: builder.go the Builder and its windows by wall-clock interval;
// add.go events into samples; stack.go their stacks; window.go a window's
// stacks, samples and bounds; steps.go labelling by step and phase; gpu.go
// sharing a step's GPU time; flush.go steps in, complete windows out;
// pprof.go a window as a pprof; stats.go the counts.
package profiles
