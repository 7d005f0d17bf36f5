"""The pin-memory thread's loop, where torch keeps it (_utils/pin_memory.py):
batches from the workers' result queue into the loader's own queue.Queue."""
import queue


def _pin_memory_loop(in_queue, out_queue, done):
    while not done.is_set():
        try:
            r = in_queue.get(timeout=0.1)
        except queue.Empty:
            continue
        out_queue.put(r)  # where torch pins the batch's memory
