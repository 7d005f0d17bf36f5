// Package cudaapi is the table of CUDA entry points gpuprof knows: their
// symbol names, the library layer they live in (runtime libcudart or driver
// libcuda), what class of operation they are, and where in the x86-64 calling
// convention their interesting arguments sit.
//
// The table is the single place that says what a probe captures and how an
// event is read back; probes/ attaches from it and correlate/ interprets
// events with it. IDs are positions in the table and are only stable within
// one build: recorded traces name the API instead.
package cudaapi
