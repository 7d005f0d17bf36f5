"""A Python process that waits in queue.Queue.get and loads CUDA late: its
main thread takes an item a producer thread puts every 20 ms, and after
LOAD_S seconds loads LIBDIR's libcudart.so.13 (gpuprof's stand-in, or a
real one) with ctypes, as a trainer imports torch; it ends after
DURATION_S. gpuprof thins a CPU-only process's Python wait probes, and
attaches them for good once it loads CUDA (probes/cpuonly.go).

  python3 late_cuda.py LIBDIR LOAD_S DURATION_S
"""
import ctypes, os, queue, sys, threading, time

libdir, load_s, duration = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
q = queue.Queue()


def produce():
    while True:
        time.sleep(0.02)
        q.put(1)


threading.Thread(target=produce, daemon=True).start()
start = time.monotonic()
loaded = False
while time.monotonic() - start < duration:
    q.get()
    if not loaded and time.monotonic() - start >= load_s:
        ctypes.CDLL(os.path.join(libdir, "libcudart.so.13"))
        loaded = True
