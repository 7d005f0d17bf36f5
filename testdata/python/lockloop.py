"""Lock traffic for gpuprof's Python probe benchmark.

  python3 lockloop.py uncontended|pingpong

Prints "ready", then for each line N on stdin runs N rounds and prints the
mean ns per round: "uncontended" acquires and releases a free lock (the
fast path, which in a shared-libpython build calls the probed
PyThread_acquire_lock_timed with no timeout); "pingpong" hands control
between two threads through two locks, so each round is two blocking waits.
"""
import sys, threading, time

mode = sys.argv[1]
lock = threading.Lock()
a, b = threading.Lock(), threading.Lock()
a.acquire()
b.acquire()
rounds = [0]


def partner():
    while True:
        a.acquire()  # blocks until the main thread releases it
        b.release()


if mode == "pingpong":
    threading.Thread(target=partner, daemon=True).start()

print("ready", flush=True)
for line in sys.stdin:
    n = int(line)
    t0 = time.perf_counter_ns()
    if mode == "uncontended":
        for _ in range(n):
            lock.acquire()
            lock.release()
    else:
        for _ in range(n):
            a.release()
            b.acquire()  # blocks until the partner releases it
    print(f"{(time.perf_counter_ns() - t0) / n:.1f}", flush=True)
