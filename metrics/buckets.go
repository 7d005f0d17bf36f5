package metrics

import "github.com/prometheus/client_golang/prometheus"

// stepBuckets bound step and wall times. Steps run from ~1 ms (a small
// model, a launch-bound loop) to minutes (a large model's accumulated
// micro-batches), so the buckets are exponential: factor √2 from 1 ms to
// 2^19 ms ≈ 8.7 min, 39 of them. √2 rather than 2 because the quantiles
// the dashboards and the straggler query read are only as fine as a
// bucket: with √2, a rank 40% slower than the rest lands a bucket or more
// apart; with 2 it can share its bucket. That is 42 series a process per
// histogram: fine for the few processes a host profiles.
var stepBuckets = prometheus.ExponentialBuckets(0.001, 1.4142135623730951, 39)

// phaseBuckets bound a step's phases (data, compute, dispatch wait,
// sync), which start smaller than steps (a 100 µs copy-in, a dispatch
// wait of 50 µs, the shortest gpuprof times) and are read mostly for
// their sums (the shares of a step): factor 2 from 50 µs to ~3.5 min, 23
// buckets, keeping the four phases' series near one step histogram's.
var phaseBuckets = prometheus.ExponentialBuckets(50e-6, 2, 23)
