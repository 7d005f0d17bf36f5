"""multiprocessing queue gets for gpuprof's whole-get benchmark.

  python3 getloop.py

Prints "ready", then for each line N on stdin puts an item into a
multiprocessing.Queue and gets it back N times and prints the mean ns a
round: the put hands the item to the queue's feeder thread, which writes
it to the pipe the get reads, so each get waits for that thread.
"""
import multiprocessing as mp, sys, time

q = mp.Queue()
q.put(0)
q.get()
print("ready", flush=True)
for line in sys.stdin:
    n = int(line)
    t0 = time.perf_counter_ns()
    for i in range(n):
        q.put(i)
        q.get()
    print((time.perf_counter_ns() - t0) / n, flush=True)
