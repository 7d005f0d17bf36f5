// Package pyroscope sends the pprof profiles gpuprof builds to a Grafana
// Pyroscope server, with what a profiler on a training host needs of it:
// Push never blocks the caller and never holds more than a bounded queue,
// every upload's fate is counted (sent, failed by why, dropped by why), a
// server that comes back is used again, and Close returns within 5 s
// whatever the server does.
//
// The transport is github.com/grafana/pyroscope-go's upstream/remote, as
// issue 27 asks: it owns the /ingest multipart form, the query parameters
// the server reads (name, from, until, spyName), basic auth and the tenant
// header. Its traps (../shared/design/OUTPUTS.md) are kept out of reach
// rather than worked around one by one:
//   - it is never asked to queue: each lane (lane.go) hands one job to its
//     own remote.Remote (Threads 1) and waits on Flush, so its 20-job
//     channel never fills, nothing is uploaded after Stop, and Stop runs
//     once, after the lane is idle;
//   - it reports nothing to the caller, so each lane's remote gets its own
//     HTTP client (transport.go), which sees the status code or the
//     transport error of the one request in flight, and its own Logger,
//     which keeps the error text: the lane knows each job's outcome;
//   - a custom client replaces its timeout and connection limits, so ours
//     sets them, and binds every request to a context that Close cancels:
//     a hung server cannot hold the exit past the bound.
//
// So upstream/remote is kept: the guarantees hold with it, and a
// hand-written multipart POST would only repeat its form. Had it to be
// asked to queue, it would not be.
//
// What the server accepts (pkg/validation of Pyroscope v1.9.0) is checked
// before sending (names.go, encode.go): the service part of the name, label
// names and values, profiles within the server's ingestion window, at most
// 16,000 samples and, by default, 2 MiB uncompressed (the server's burst
// size: a larger push is refused as rate-limited however long one waits).
package pyroscope
