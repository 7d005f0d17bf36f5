// Package htmlreport draws a run as one self-contained HTML page: the
// verdict and its evidence first, then plots of the step breakdown over
// time, capacities, the sample pool and the GPUs' state, the ranks side by
// side, and the top kernels and waits. Plots are SVG drawn here, so the
// page needs no network and no script to be read; a small script only
// adds a readout under the pointer.
//
// A Collector takes the run's events and steps as they come (bins.go keeps
// its memory bounded however long the run), and Write renders it with the
// run's summaries at the end.
package htmlreport
