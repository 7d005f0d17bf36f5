"""A consumer taking file descriptors from a producer process the way a
tensor comes through torch's multiprocessing queues (file_descriptor
sharing): the queue carries a multiprocessing.resource_sharer.DupFd, and
the consumer's detach() asks the producer's resource-sharer thread for the
descriptor, then waits in recvmsg until that thread has the producer's GIL
back from its main thread. Logs each detach like queue_waits.py.

  python3 fd_waits.py GETS BUSY_S START_DELAY_S TRUTH

BUSY_S is how long the producer holds the GIL at a time, between checks
that the consumer is done.
"""
import ctypes, json, multiprocessing as mp, os, sys, time
from multiprocessing import resource_sharer


def produce(q, gets, busy, done):
    for _ in range(gets):
        r, w = os.pipe()
        q.put(resource_sharer.DupFd(r))  # registers a duplicate to hand out
        os.close(r)
        os.close(w)
    # Holding the GIL until every descriptor was taken, asleep (a PyDLL
    # call keeps the GIL; no CPU, so a loaded machine does not shorten
    # it): each request waits for the sharer thread to get its turn.
    hold = ctypes.PyDLL(None).usleep
    while not done.is_set():
        hold(int(busy * 1e6))


def consume(q, gets, out):
    for i in range(gets):
        df = q.get(timeout=10)
        t0 = time.monotonic_ns()
        os.close(df.detach())
        t1 = time.monotonic_ns()
        if i == 0:
            continue  # the first imports what the connection needs
        out.write(json.dumps({"t_start_ns": t0, "t_end_ns": t1, "wait": (t1 - t0) / 1e9}) + "\n")


if __name__ == "__main__":
    gets, busy, delay, truth = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    q, done = mp.Queue(), mp.Event()
    time.sleep(delay)
    p = mp.Process(target=produce, args=(q, gets, busy, done))
    p.start()
    with open(truth, "w") as out:
        consume(q, gets, out)
    done.set()
    p.join()
