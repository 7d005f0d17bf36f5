"""Condition waits in a CPython process, for gpuprof's GIL probes.

  python3 gil_waits.py tail|native SECONDS COUNT_FILE

tail: a thread spins in Python, holding the GIL, while the main thread
takes 2 ms naps: each nap ends waiting for the GIL (take_gil's
pthread_cond_timedwait), the wait's tail gpuprof reports.
native: two threads hand a token back and forth through libc's untimed
pthread_cond_wait (ctypes, the GIL released as in any C extension), the
kind of wait CUDA's, NCCL's and std::condition_variable's threads make;
COUNT_FILE gets the number of waits made.
"""
import ctypes, sys, threading, time

mode, seconds, count_file = sys.argv[1], float(sys.argv[2]), sys.argv[3]
time.sleep(0.5)  # for gpuprof to attach
end = time.monotonic() + seconds

if mode == "tail":
    def spin():
        x = 0
        while time.monotonic() < end:
            x += 1
    threading.Thread(target=spin, daemon=True).start()
    while time.monotonic() < end:
        time.sleep(0.002)
else:
    libc = ctypes.CDLL(None, use_errno=True)
    mutex = ctypes.create_string_buffer(64)  # pthread_mutex_t is 40 bytes on x86-64
    cond = ctypes.create_string_buffer(64)  # pthread_cond_t 48
    libc.pthread_mutex_init(mutex, None)
    libc.pthread_cond_init(cond, None)
    turn = ctypes.c_int(0)
    waits = [0, 0]

    def player(me):
        libc.pthread_mutex_lock(mutex)
        while time.monotonic() < end:
            while turn.value != me and time.monotonic() < end:
                libc.pthread_cond_wait(cond, mutex)
                waits[me] += 1
            turn.value = 1 - me
            libc.pthread_cond_broadcast(cond)
        turn.value = 1 - me
        libc.pthread_cond_broadcast(cond)
        libc.pthread_mutex_unlock(mutex)

    threads = [threading.Thread(target=player, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(count_file, "w") as f:
        f.write(str(sum(waits)))
