"""Python calls for gpuprof's py: probe benchmark.

  python3 callloop.py

Prints "ready", then for each line N on stdin calls tiny() N times and
prints the mean ns per call (loop included).
"""
import sys, time


def tiny():
    return 1


print("ready", flush=True)
for line in sys.stdin:
    n = int(line)
    t0 = time.perf_counter_ns()
    for _ in range(n):
        tiny()
    print((time.perf_counter_ns() - t0) / n, flush=True)
