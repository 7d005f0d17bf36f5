"""How far after the truth's end of data loading gpuprof's end of it comes.

  python3 testdata/gpuhost/datagap.py TRACE.jsonl.gz TRUTH.jsonl[.gz]

The truth ends a step's data phase at a line of Python (t_data_end_ns); the
first thing gpuprof sees after it is the step thread's next CUDA event
record (its compute's start event). Prints the distribution of the time
between the two over the steps after warm-up, and the truth's median
data_time beside it.
"""
import bisect, gzip, json, statistics, sys


def rows(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f]


trace, truth = rows(sys.argv[1])[1:], rows(sys.argv[2])
records = [e for e in trace if e.get("api", "").startswith("cudaEventRecord")]
# The step thread: the one whose records follow the truth's data ends.
tid = max({e["tid"] for e in records}, key=lambda t: sum(e["tid"] == t for e in records))
starts = sorted(e["s"] for e in records if e["tid"] == tid)
gaps = []
for t in truth[20:]:
    i = bisect.bisect_left(starts, t["t_data_end_ns"])
    if i < len(starts):
        gaps.append((starts[i] - t["t_data_end_ns"]) / 1e3)
gaps.sort()
n = len(gaps)
q = lambda p: gaps[min(n - 1, int(p * n))]
print(f"{n} steps: t_data_end to the next event record, µs: p10 {q(0.1):.0f} p50 {q(0.5):.0f} "
      f"p75 {q(0.75):.0f} p90 {q(0.9):.0f} p99 {q(0.99):.0f} mean {statistics.mean(gaps):.0f}")
print(f"truth data_time median {statistics.median(t['data_time'] for t in truth[20:]) * 1e6:.0f} µs")
