"""Calls Python functions gpuprof times with --probe ROLE=py:MODULE:QUALNAME,
and logs each call as the caller sees it, for gpuprof's tests.

  python3 pycalls.py TRUTH [--calls N] [--start-delay S] [--define-late S]

TRUTH gets one JSON line per call: {"func", "tid", "t0", "t1"}
(CLOCK_MONOTONIC ns, taken right before the call and right after it
returned). The shapes: a module-level function; a method with two return
statements taken in turn; a recursive function (only the outermost call is
a call to time); a function that raises every third call (those calls
are not logged, and not to be timed); and a worker thread started after
the start delay, calling the module-level function too. --define-late S
imports multiprocessing.queues at once (what attach watches by itself)
and defines the functions S seconds later: functions named with --probe
found after gpuprof's own are watched with all four debug registers, the
gets' native anchors taking none.
"""
import argparse, json, threading, time

p = argparse.ArgumentParser()
p.add_argument("truth")
p.add_argument("--calls", type=int, default=60)
p.add_argument("--start-delay", type=float, default=1.0)
p.add_argument("--define-late", type=float, default=0.0)
args = p.parse_args()
if args.define_late:
    import multiprocessing.queues

    time.sleep(args.define_late)


def fetch(ms):
    time.sleep(ms / 1000)
    return ms


class Loader:
    def __init__(self):
        self.n = 0

    def next_batch(self):
        self.n += 1
        time.sleep(0.001)
        if self.n % 2:
            return "odd"
        return "even"


def depth(n):
    if n == 0:
        time.sleep(0.002)
        return 0
    return depth(n - 1) + 1


def flaky(i):
    time.sleep(0.001)
    if i % 3 == 0:
        raise ValueError(i)
    return i


out = open(args.truth, "w")
lock = threading.Lock()


def timed(name, f, *a):
    t0 = time.monotonic_ns()
    try:
        f(*a)
    except ValueError:
        return
    t1 = time.monotonic_ns()
    with lock:
        out.write(json.dumps({"func": name, "tid": threading.get_native_id(), "t0": t0, "t1": t1}) + "\n")


time.sleep(args.start_delay)


def worker():
    for _ in range(args.calls):
        timed("fetch", fetch, 1)


w = threading.Thread(target=worker)
w.start()
loader = Loader()
for i in range(args.calls):
    timed("fetch", fetch, 2)
    timed("next_batch", loader.next_batch)
    timed("depth", depth, 3)
    timed("flaky", flaky, i)
w.join()
out.close()
