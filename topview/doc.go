// Package topview is gpuprof top's full-screen live view, in the spirit of
// py-spy top and nvitop: the phases of each process's latest step, the
// last steps, the GPUs' state, a table of ranks when there are several,
// and the bottleneck over the recent steps.
//
// It is two layers. A Model takes what a profile sees (steps, notes and
// GPU samples, from the goroutine that adds events) into bounded memory
// and lays a screen out as lines of text for any size (Render), with no
// terminal, so that the layout is tested at fixed sizes. A Screen owns
// the terminal (tcell): it draws the model at least twice a second and on
// resize, and returns on a quit key or when its context ends.
package topview
