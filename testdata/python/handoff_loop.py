"""A GIL-bound loop for overhead.py on a machine without a GPU: a producer
thread fills a queue.Queue(4) as fast as it can, the main thread takes 4
items a step and does ~1 ms of Python work, logging each step.

  python3 testdata/gpuhost/overhead.py . bin/gpuprof handoff 3 4 --learn 1.5 \\
      --config default= --job "python3 testdata/python/handoff_loop.py --out {out}" --truth truth.jsonl

DIR/truth.jsonl: one line a step, {"t_end_ns", "step_time"} on
CLOCK_MONOTONIC. The two threads hand the GIL and the queue's condition
back and forth every item, which is where a probe on the waits shows.
"""
import json, os, queue, sys, threading, time

out = sys.argv[sys.argv.index("--out") + 1]
q = queue.Queue(4)


def produce():
    while True:
        q.put(sum(range(20000)))


threading.Thread(target=produce, daemon=True).start()
with open(os.path.join(out, "truth.jsonl"), "w") as f:
    while True:
        t0 = time.monotonic_ns()
        for _ in range(4):
            q.get()
        sum(range(100000))
        t1 = time.monotonic_ns()
        f.write(json.dumps(dict(t_end_ns=t1, step_time=(t1 - t0) / 1e9)) + "\n")
        f.flush()
