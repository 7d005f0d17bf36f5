"""Time off CPU in a CPython process, for gpuprof's off-CPU samples.

  python3 offcpu.py SECONDS TIMES_FILE

The main thread naps (time.sleep, a wait gpuprof's Python probes time)
for SECONDS, then spins in Python, holding the GIL, for SECONDS. All the
while a second thread, gil_taker, calls os.stat, a C call that lets the
GIL go: while the main thread spins, each call ends off CPU waiting to
take the GIL back, which no probe times. TIMES_FILE gets the main
thread's time napping and the taker's CPU time, in seconds, as JSON.
"""
import json, os, sys, threading, time

seconds, times_file = float(sys.argv[1]), sys.argv[2]
time.sleep(0.5)  # for gpuprof to attach
stop = False
taker_cpu = [0.0]


def gil_taker():
    t0 = time.thread_time()
    while not stop:
        os.stat("/")
    taker_cpu[0] = time.thread_time() - t0


def nap(until):
    napped = 0.0
    while time.monotonic() < until:
        t0 = time.monotonic()
        time.sleep(0.02)
        napped += time.monotonic() - t0
    return napped


def spin(until):
    x = 0
    while time.monotonic() < until:
        x += 1
    return x


taker = threading.Thread(target=gil_taker)
taker.start()
start = time.monotonic()
napped = nap(start + seconds)
spin(start + 2 * seconds)
stop = True
taker.join()
with open(times_file, "w") as f:
    json.dump({"napped": napped, "taker_cpu": taker_cpu[0], "taker_tid": taker.native_id}, f)
