// Package perfetto writes what gpuprof sees as a Chrome trace JSON file
// (the Trace Event Format) that opens in Perfetto (ui.perfetto.dev): a
// process a PID, named by its rank where it has one; on it a track of its
// steps, each step a slice with its phases nested inside; a track a thread
// for what held the thread (Python waits, GIL waits, CUDA syncs and copies,
// the functions named with --probe); counters for the GPUs (NVML) and, at
// each step's end, its step time, pool and launches.
//
// It streams: each event is written as it comes, with hand-built appends
// of a few bytes rather than encoding/json (BenchmarkWriter prices it), and
// past Options.MaxBytes nothing more is written but the closing metadata,
// so a long run's file stays bounded and still opens.
//
// Slices on one track must nest (a slice contains another or is apart from
// it), or Perfetto drops or misdraws them. Probes' times can cross by a few
// nanoseconds and a return can be missed, so each track keeps its latest
// slices and a slice that would cross one of them goes to an "overlaps"
// lane of its thread instead (Writer's doc).
//
// Times are CLOCK_MONOTONIC nanoseconds, as every event's; the file's ts
// are microseconds from a clock origin (otherData.clock_origin_ns) so that
// they stay small and exact: a ts of T µs is clock_origin_ns + T*1000 ns,
// the clock of --jsonl's t_start_ns. docs/timeline.md says what the file
// holds.
package perfetto
