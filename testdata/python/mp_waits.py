"""A consumer waiting in multiprocessing.Queue.get(timeout=...) for a
producer process, logging its own waits like queue_waits.py.

  python3 mp_waits.py GETS PAUSE_S START_DELAY_S TRUTH [IDLE_THREADS]

IDLE_THREADS threads wait on an Event meanwhile (waits, but in no get).
"""
import json, multiprocessing as mp, sys, threading, time


def produce(q, gets, pause):
    for i in range(gets):
        time.sleep(pause)
        q.put(i)


def consume(q, gets, out):
    for _ in range(gets):
        t0 = time.monotonic_ns()
        q.get(timeout=10)
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
        consume(q, gets, out)
    stop.set()
    p.join()
