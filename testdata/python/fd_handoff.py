"""The data path of a torch trainer fed through a torch.multiprocessing
queue, without torch or a GPU, for overhead.py on a machine without one:
an engine process puts items into a multiprocessing.Queue(64), each
carrying a file descriptor the way torch shares a tensor's memory
(multiprocessing.reduction.DupFd: the receiver connects to the sender's
resource-sharer thread and takes the descriptor with recvmsg); the main
process takes 4 a step, maps and reads each, then sleeps --compute-ms
with the GIL released (the GPU's part of a step), logging each step.
With --libdir DIR that part runs on gpuprof's stand-in CUDA libraries in
DIR (testdata/build) instead, as a torch step's would: events recorded
around --compute-ms of 0.1 ms kernels, the loss copied back, a stream sync
and the elapsed time read. gpuprof then finds the steps, and samples what
it probes as it does on a GPU.

  python3 testdata/gpuhost/overhead.py . bin/gpuprof fd 3 5 --learn 1.5 \\
      --config default=--children --job "python3 testdata/python/fd_handoff.py --out {out}" --truth truth.jsonl

DIR/truth.jsonl: one line a step on CLOCK_MONOTONIC: t_start_ns, t_end_ns,
step_time (the compute), data_time and dispatch_wait (the 4 gets).
"""
import ctypes, json, mmap, multiprocessing as mp, os, sys, time
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


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


def standin_gpu(libdir, compute):
    """The GPU's part on the stand-in libraries: a function doing one step's."""
    rt = ctypes.CDLL(os.path.join(libdir, "libcudart.so.13"))
    rt.cudaLaunchKernel.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    rt.cudaMemcpyAsync.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    rt.cudaEventRecordWithFlags.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint]
    rt.cudaEventElapsedTime.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_void_p]
    rt.cudaStreamSynchronize.argtypes = [ctypes.c_void_p]

    def new(fn, *extra):
        h = ctypes.c_void_p()
        if fn(ctypes.byref(h), *extra) != 0:
            raise RuntimeError("stand-in CUDA call failed")
        return h

    stream, loss = new(rt.cudaStreamCreate), new(rt.cudaMalloc, 4)
    begin, end = new(rt.cudaEventCreate), new(rt.cudaEventCreate)
    kernel = ctypes.cast(rt.cudaGetLastError, ctypes.c_void_p)  # a host address as kernel identity
    host = ctypes.create_string_buffer(4)
    kernels = max(1, round(compute / 1e-4))

    def step():
        rt.cudaEventRecordWithFlags(begin, stream, 0)
        for _ in range(kernels):
            rt.cudaLaunchKernel(kernel, Dim3(100, 1, 1), Dim3(128, 1, 1), None, 0, stream)
        rt.cudaEventRecordWithFlags(end, stream, 0)
        rt.cudaMemcpyAsync(host, loss, 4, 2, stream)  # loss.item()
        rt.cudaStreamSynchronize(stream)
        ms = ctypes.c_float()
        rt.cudaEventElapsedTime(ctypes.byref(ms), begin, end)
    return step


def main():
    out = sys.argv[sys.argv.index("--out") + 1]
    compute = float(sys.argv[sys.argv.index("--compute-ms") + 1]) / 1e3 if "--compute-ms" in sys.argv else 0.01
    gpu = lambda: time.sleep(compute)
    if "--libdir" in sys.argv:
        gpu = standin_gpu(sys.argv[sys.argv.index("--libdir") + 1], compute)
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
            gpu()
            t2 = time.monotonic_ns()
            f.write(json.dumps(dict(step=step, t_start_ns=t0, t_end_ns=t2, step_time=(t2 - t1) / 1e9,
                                    data_time=(t1 - t0) / 1e9, dispatch_wait=(t1 - t0) / 1e9)) + "\n")
            f.flush()
            step += 1


if __name__ == "__main__":
    main()
