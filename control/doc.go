// Package control is gpuprof's feedback loop from steps to probes: it cuts
// each process's events into steps (one correlate.Correlator a process) and,
// from what the steps show, tells the probes what to keep. While a
// process's step boundary is learned, a process launching more kernels than
// the learning budget pays for has them counted only part of the time
// (learnlaunches.go). Once a process's
// step boundary is found its launches are counted only part of the time,
// its event records probed only where the job reads them, and its Python
// wait probes those its steps block in; as its steps grow longer, the
// phases its launches are counted in grow to hold whole ones.
//
// It talks to the probes through Probes (probes.Session in gpuprof) and
// sends steps and notes to an Output (the live line and --jsonl). With no
// probes (a replay) it only cuts steps, the same steps a live run cut, so
// that recorded traces replayed through it test the policy too.
package control
