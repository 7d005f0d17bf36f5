// Package metrics serves gpuprof's numbers to Prometheus: each step's
// durations, phases, verdict, launches, copies and waits; the sample
// pool and the capacities; the GPUs' state under dcgm-exporter's names;
// and gpuprof's own health, read at each scrape.
//
// An Exporter is a control.Output (it takes each step as the live line
// and --jsonl do) with a private registry, so that tests and several
// exporters in one process do not share state. Metric names follow
// Prometheus' conventions: a gpuprof_ prefix, base units (_seconds,
// _bytes), counters ending in _total, ratios 0-1, and labels whose values
// come from a small fixed set or one per process (pid, rank), never one
// per step or kernel. docs/prometheus.md lists them with their queries.
package metrics
