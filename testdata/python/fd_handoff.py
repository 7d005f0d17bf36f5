"""The data path of a torch trainer fed through a torch.multiprocessing
queue, without torch or a GPU, for overhead.py on a machine without one:
an engine process puts items into a multiprocessing.Queue(64), each
carrying a file descriptor the way torch shares a tensor's memory
(multiprocessing.reduction.DupFd: the receiver connects to the sender's
resource-sharer thread and takes the descriptor with recvmsg); the main
process takes 4 a step, maps and reads each, then sleeps --compute-ms
with the GIL released (the GPU's part of a step), logging each step.

  python3 testdata/gpuhost/overhead.py . bin/gpuprof fd 3 5 --learn 1.5 \\
      --config default=--children --job "python3 testdata/python/fd_handoff.py --out {out}" --truth truth.jsonl

DIR/truth.jsonl: one line a step on CLOCK_MONOTONIC: t_start_ns, t_end_ns,
step_time (the compute), data_time and dispatch_wait (the 4 gets).
"""
import json, mmap, multiprocessing as mp, os, sys, time
from multiprocessing import reduction

SIZE = 1 << 16


def rebuild(df):
    fd = df.detach()
    with mmap.mmap(fd, SIZE) as m:
        first = m[0]
    os.close(fd)
    return first


class Shared:
    """An item whose memory travels as a descriptor, like a shared tensor."""

    def __init__(self, fd):
        self.df = reduction.DupFd(fd)  # a duplicate the sharer hands out once

    def __reduce__(self):
        return rebuild, (self.df,)


def engine(q):
    while True:
        fd = os.memfd_create("sample")
        os.ftruncate(fd, SIZE)
        q.put(Shared(fd))
        os.close(fd)
        time.sleep(0)


def main():
    out = sys.argv[sys.argv.index("--out") + 1]
    compute = float(sys.argv[sys.argv.index("--compute-ms") + 1]) / 1e3 if "--compute-ms" in sys.argv else 0.01
    ctx = mp.get_context("spawn")
    q = ctx.Queue(64)
    ctx.Process(target=engine, args=(q,), daemon=True).start()
    with open(os.path.join(out, "truth.jsonl"), "w") as f:
        step = 0
        while True:
            t0 = time.monotonic_ns()
            for _ in range(4):
                q.get()
            t1 = time.monotonic_ns()
            time.sleep(compute)
            t2 = time.monotonic_ns()
            f.write(json.dumps(dict(step=step, t_start_ns=t0, t_end_ns=t2, step_time=(t2 - t1) / 1e9,
                                    data_time=(t1 - t0) / 1e9, dispatch_wait=(t1 - t0) / 1e9)) + "\n")
            f.flush()
            step += 1


if __name__ == "__main__":
    main()
