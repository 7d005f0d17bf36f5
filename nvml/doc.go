// Package nvml samples the hardware state of a host's GPUs through NVML
// (github.com/NVIDIA/go-nvml): utilization, memory, power, temperature,
// clocks and their throttle reasons, PCIe and NVLink traffic, ECC errors,
// GPM activity (SM, tensor, DRAM) and each process's share, plus the Xid
// errors the driver reports.
//
// It costs the job nothing: NVML reads counters the driver and the GPU keep
// anyway, from gpuprof's own process and threads, with no CUDA context, no
// kernel launched and nothing in the job's address space.
//
// The rules it keeps, so that a broken driver or GPU costs gpuprof a field
// and never the run:
//
//   - Every NVML call runs on one worker goroutine and is waited for at most
//     Config.CallTimeout. One that does not return in time leaves its field
//     absent, logs one warning naming the call and GPU, and makes the
//     sampler leave NVML alone (no call, no goroutine piling up behind it)
//     until it returns; then sampling resumes.
//   - A field a GPU does not support (not supported, no permission, a
//     driver too old to have the function) is absent and not asked again,
//     with at most one warning per field, naming every GPU concerned.
//   - A GPU lost (fallen off the bus) is dropped from later rounds with one
//     warning; the others go on.
//   - No libnvidia-ml.so.1 or no driver: New returns one line saying so and
//     what to do.
//   - Absent is NaN (events.Has), never zero.
//
// Two calls cost far more than the rest (see fields): per-process
// utilization, and PCIe traffic where GPM cannot give it; they are read in
// the first two rounds and then at most once a second. The wait for Xid
// events, which blocks in the driver by design, has a goroutine of its own
// (WatchXids).
//
// Tests run on go-nvml's DGX H200 mock (no GPU needed);
// BenchmarkSampleRoundReal measures the real library on a GPU host.
package nvml
