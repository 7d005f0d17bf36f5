"""Gets from a multiprocessing.Queue and a multiprocessing.SimpleQueue in
turn, fed by a thread, each get logged (gpuprof's native anchors serve
both functions with one set of probes).

  python3 mp_two_queues.py GETS PAUSE_S TRUTH

Prints "ready" once both queues exist; each line of TRUTH is one get:
{"queue": "Queue" | "SimpleQueue", "t_start_ns", "t_end_ns"}.
"""
import json, multiprocessing as mp, sys, threading, time

gets, pause, truth = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
q, sq = mp.Queue(), mp.SimpleQueue()


def produce():
    for i in range(gets):
        time.sleep(pause)
        (q if i % 2 == 0 else sq).put(i)


print("ready", flush=True)
threading.Thread(target=produce, daemon=True).start()
with open(truth, "w") as out:
    for i in range(gets):
        t0 = time.monotonic_ns()
        (q if i % 2 == 0 else sq).get()
        t1 = time.monotonic_ns()
        out.write(json.dumps({"queue": "Queue" if i % 2 == 0 else "SimpleQueue", "t_start_ns": t0, "t_end_ns": t1}) + "\n")
