"""A consumer thread blocking in queue.Queue.get, logging its own waits.

  python3 queue_waits.py GETS PAUSE_S START_DELAY_S TRUTH

A producer puts an item every PAUSE_S seconds; consume() takes GETS items
and writes, per get that blocked, {"t_start_ns", "t_end_ns", "wait"} on
CLOCK_MONOTONIC, the clock gpuprof's events carry. gpuprof's integration
tests attach during the start delay and hold its waits to this log.
"""
import json, queue, sys, threading, time

gets, pause, delay, truth = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
q = queue.Queue()


def produce():
    for i in range(gets):
        time.sleep(pause)
        q.put(i)


def consume(out):
    for _ in range(gets):
        t0 = time.monotonic_ns()
        q.get()
        t1 = time.monotonic_ns()
        out.write(json.dumps({"t_start_ns": t0, "t_end_ns": t1, "wait": (t1 - t0) / 1e9}) + "\n")


time.sleep(delay)
threading.Thread(target=produce, daemon=True).start()
with open(truth, "w") as out:
    consume(out)
