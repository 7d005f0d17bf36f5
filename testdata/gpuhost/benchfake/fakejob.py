"""A job for dry runs of bench.py: writes spec_pipeline.py's truth lines
from a main-thread loop (a queue get fed by a thread: data_time; a busy
loop: compute_time), and accepts the real workloads' arguments.

  python3 fakejob.py [--truth FILE | --out DIR] [--steps N] [--seconds S] [--mode M] ...
"""
import argparse, json, os, queue, threading, time

import torch  # noqa: F401  (benchfake's: as the real jobs import it first)

p = argparse.ArgumentParser()
p.add_argument("--truth", default="")
p.add_argument("--out", default="")
p.add_argument("--steps", type=int, default=10 ** 9)
p.add_argument("--seconds", type=float, default=1e9)
p.add_argument("--mode", default="compute")
p.add_argument("--start-delay", type=float, default=0)
p.add_argument("--step-ms", type=float, default=4.0)
args, _ = p.parse_known_args()
truth = args.truth or os.path.join(args.out, "truth.jsonl")
time.sleep(0.5 + args.start_delay)  # "imports torch"
q = queue.Queue(maxsize=4)


def feed():
    while True:
        time.sleep(args.step_ms / 4e3)
        q.put(1)


threading.Thread(target=feed, daemon=True).start()
stop = time.monotonic() + args.seconds
with open(truth, "w") as out:
    for step in range(args.steps):
        if time.monotonic() > stop:
            break
        t0 = time.monotonic_ns()
        q.get()
        t1 = time.monotonic_ns()
        end = time.monotonic() + args.step_ms * 0.75 / 1e3
        while time.monotonic() < end:
            pass
        t2 = time.monotonic_ns()
        out.write(json.dumps(dict(step=step, t_start_ns=t0, t_data_end_ns=t1, t_end_ns=t2, step_time=(t2 - t0) / 1e9,
                                  data_time=(t1 - t0) / 1e9, compute_time=(t2 - t1) / 1e9, dispatch_wait=0.0)) + "\n")
        out.flush()
