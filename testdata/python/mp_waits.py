"""A consumer waiting in multiprocessing.Queue.get(timeout=...) for a
producer process, logging its own waits like queue_waits.py.

  python3 mp_waits.py GETS PAUSE_S START_DELAY_S TRUTH [IDLE_THREADS [TIMEOUT_S|none]]

IDLE_THREADS threads wait on an Event meanwhile (waits, but in no get).
Gets wait up to TIMEOUT_S (default 10), or with none as long as it takes:
q.get(), which takes the queue's lock by `with`, where a timeout takes it
by acquire. With MP_WAITS_PURE_PICKLE set in the environment, pickle is
its Python implementation.
"""
import json, os, sys

if os.environ.get("MP_WAITS_PURE_PICKLE"):
    # pickle's Python implementation: no C loads for a get's native
    # anchors, which then fall back to watchpoints.
    sys.modules["_pickle"] = None
import multiprocessing as mp, threading, time


def produce(q, gets, pause):
    for i in range(gets):
        time.sleep(pause)
        q.put(i)


def consume(q, gets, out, timeout):
    for _ in range(gets):
        t0 = time.monotonic_ns()
        q.get() if timeout is None else q.get(timeout=timeout)
        t1 = time.monotonic_ns()
        out.write(json.dumps({"t_start_ns": t0, "t_end_ns": t1, "wait": (t1 - t0) / 1e9}) + "\n")


if __name__ == "__main__":
    gets, pause, delay, truth = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    stop = threading.Event()

    def idle():
        while not stop.wait(0.02):
            pass

    for _ in range(int(sys.argv[5]) if len(sys.argv) > 5 else 0):
        threading.Thread(target=idle, daemon=True).start()
    q = mp.Queue()
    time.sleep(delay)
    p = mp.Process(target=produce, args=(q, gets, pause))
    p.start()
    with open(truth, "w") as out:
        timeout = sys.argv[6] if len(sys.argv) > 6 else "10"
        consume(q, gets, out, None if timeout == "none" else float(timeout))
    stop.set()
    p.join()
