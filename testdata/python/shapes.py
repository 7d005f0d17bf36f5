"""Training loops of the shapes gpuprof must cut right (issue 25), on its
stand-in CUDA libraries through ctypes as pipeline.py is, each writing its
own truth (pipeline.py's fields, CLOCK_MONOTONIC ns) for the integration
tests (cmd/gpuprof/shapes_test.go) to hold gpuprof to, without a GPU.

  python3 shapes.py LIBDIR --shape sync|accum|polled --mode data|compute|infer \\
      --truth T --steps N [--start-delay S]

sync    a plain supervised loop over a DataLoader (the stand-in in
        standin/: 2 worker processes, pin_memory=True) and no CUDA events:
        next(), the copy in, cudaDeviceSynchronize, the forward's kernels,
        then the backward pass on another native thread as PyTorch's
        autograd engine runs it (libstandin_autograd.so: the main thread
        waits in a pthread condition wait, the GIL released, while that
        thread launches more kernels than the forward and makes one
        device-to-device copy), the optimizer's kernels and a second
        cudaDeviceSynchronize. data_time is next(), the copy and the first
        sync; compute_time the time between the two syncs; no dispatch wait.
accum   gradient accumulation: two micro-batches a step, each taking its
        samples from a multiprocessing.Queue that engine processes fill
        (blocking gets), making them with CPU copies, copying them in and
        timing its forward/backward (the second's with the optimizer) with
        its own pair of CUDA events; one 4-byte copy back and stream sync
        a step (loss.item()), then both elapsed times read. dispatch_wait
        is the time in the gets; data_time the rest of the data phases;
        compute_time the two readings together.
polled  a controller that polls the pool's qsize() in a time.sleep(0.002)
        loop until a batch is there (dispatch_wait), takes it with
        get_nowait(), fetches (CPU copies) and copies it in, and times its
        compute with CUDA events, then loss.item().

Modes: data (the CPU's work on a batch dominates), compute (kernels
dominate), infer (accum, polled: slow engines, so the loop waits for
samples). thru is the samples a second the loop realised, from the previous
step's end to this one's (as pipeline.py).
"""
import argparse, ctypes, json, multiprocessing, os, queue, sys, time

p = argparse.ArgumentParser()
p.add_argument("libdir")
p.add_argument("--shape", required=True, choices=["sync", "accum", "polled"])
p.add_argument("--mode", default="data", choices=["data", "compute", "infer"])
p.add_argument("--steps", type=int, default=100)
p.add_argument("--batch", type=int, default=4, help="samples a step (accum: half a micro-batch)")
p.add_argument("--engines", type=int, default=3)
p.add_argument("--truth", default="truth.jsonl")
p.add_argument("--start-delay", type=float, default=0.0)
args = p.parse_args()
if args.shape == "sync" and args.mode == "infer":
    p.error("--shape sync has no engines: --mode data or compute")

SAMPLE = 1 << 20
# engine pause (s), CPU copies a sample's fetch makes, kernels (0.1 ms each):
# sync: forward, backward (on the autograd thread), optimizer; accum: each
# micro-batch's, and the optimizer's; polled: the step's.
engine_pause, fetch_copies, kernels = {
    ("sync", "data"): (0, 24, (4, 8, 2)),
    ("sync", "compute"): (0, 1, (25, 50, 10)),
    ("accum", "data"): (0, 12, (4, 2)),
    ("accum", "compute"): (0, 1, (40, 10)),
    ("accum", "infer"): (0.02, 1, (10, 4)),
    ("polled", "data"): (0, 12, (20,)),
    ("polled", "infer"): (0.02, 1, (30,)),
    ("polled", "compute"): (0, 1, (100,)),
}[args.shape, args.mode]
# The sync loop's batch bytes: data-bound, 4 MiB made with 24 copies in
# the workers; compute-bound, 1 MiB made with none.
sync_batch = args.batch * SAMPLE if args.mode == "data" else SAMPLE


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


def run_engine_proc(idx, pool, go, done):
    """An engine process (as pipeline.py --procs): 0.6 ms of CPU work, the
    pause, then a sample's key; no CUDA calls."""
    pool.cancel_join_thread()  # exit without draining what the trainer did not take
    go.wait()
    n = 0
    while not done.is_set():
        t0 = time.monotonic_ns()
        while time.monotonic_ns() < t0 + 600_000:
            pass
        time.sleep(engine_pause)
        try:
            pool.put((t0, time.monotonic_ns(), idx, n), timeout=1)
        except queue.Full:
            pass
        n += 1


def make_batch(idx):
    """A DataLoader worker's batch: the samples, and the fetch's CPU copies."""
    data = bytes([idx & 0xff]) * sync_batch
    for _ in range(fetch_copies - 1):
        data = bytes(bytearray(data))
    return data


if args.shape != "sync":
    ctx = multiprocessing.get_context("fork")
    pool, go, done = ctx.Queue(maxsize=64), ctx.Event(), ctx.Event()
    engines = [ctx.Process(target=run_engine_proc, args=(i, pool, go, done), daemon=True) for i in range(args.engines)]
    for e in engines:
        e.start()
else:
    # Imported at start, as a training script imports torch.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "standin"))
    from torch.utils.data import DataLoader

rt = ctypes.CDLL(args.libdir + "/libcudart.so.13")


def check(rc):
    if rc != 0:
        raise RuntimeError(f"CUDA error {rc}")


rt.cudaLaunchKernel.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
rt.cudaMemcpyAsync.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
rt.cudaEventRecordWithFlags.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint]
rt.cudaEventElapsedTime.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_void_p]
rt.cudaStreamSynchronize.argtypes = [ctypes.c_void_p]
H2D, D2H = 1, 2
kernel = ctypes.cast(rt.cudaGetLastError, ctypes.c_void_p)  # a host address as kernel identity
optim_kernel = ctypes.cast(rt.cudaGetErrorString, ctypes.c_void_p)


def new(fn, *extra):
    h = ctypes.c_void_p()
    check(fn(ctypes.byref(h), *extra))
    return h


def launch(stream, blocks, k=kernel):
    check(rt.cudaLaunchKernel(k, Dim3(blocks, 1, 1), Dim3(128, 1, 1), None, 0, stream))


def elapsed(begin, end):
    ms = ctypes.c_float()
    check(rt.cudaEventElapsedTime(ctypes.byref(ms), begin, end))
    return ms.value / 1e3


def load_sample(key, dst):
    """A sample from its key, as a store fetch makes it: CPU copies, then the
    copy in."""
    t0, t1, idx, n = key
    t = bytes([idx & 0xff, n & 0xff]) * (SAMPLE // 2)
    for _ in range(fetch_copies - 1):
        t = bytes(bytearray(t))
    check(rt.cudaMemcpyAsync(dst, t, SAMPLE, H2D, stream))


if args.shape == "sync":
    stream = None  # the default stream, which the autograd thread shares
    ag = ctypes.CDLL(args.libdir + "/libstandin_autograd.so")
    ag.standin_backward.argtypes = [ctypes.c_int, ctypes.c_size_t]
    dev_in = new(rt.cudaMalloc, sync_batch)
else:
    stream = new(rt.cudaStreamCreate)
    dev_in = new(rt.cudaMalloc, args.batch * SAMPLE)
    events = [new(rt.cudaEventCreate) for _ in range(4)]
dev_loss = new(rt.cudaMalloc, 4)
loss = ctypes.create_string_buffer(4)


def sync_step():
    """(data_time, compute_time, dispatch_wait) of a step of the sync loop."""
    t0 = time.monotonic_ns()
    data = next(batches)
    check(rt.cudaMemcpyAsync(dev_in, data, len(data), H2D, stream))
    check(rt.cudaDeviceSynchronize())
    t1 = time.monotonic_ns()
    fwd, bwd, opt = kernels
    for _ in range(fwd):
        launch(stream, 100)
    check(ag.standin_backward(bwd, 4 * SAMPLE))  # loss.backward()
    for _ in range(opt):
        launch(stream, 100, optim_kernel)
    check(rt.cudaDeviceSynchronize())
    t2 = time.monotonic_ns()
    return (t1 - t0) / 1e9, (t2 - t1) / 1e9, 0.0


def take(i):
    """A sample from the pool (accum: a blocking get) into the batch's slot
    i; the ns blocked in the get."""
    w0 = time.monotonic_ns()
    key = pool.get()
    w = time.monotonic_ns() - w0
    load_sample(key, dev_in.value + i * SAMPLE)
    return w


def accum_step():
    t0 = time.monotonic_ns()
    waited, data_ns, per = 0, 0, args.batch // 2
    micro, opt = kernels
    for m in range(2):
        d0 = time.monotonic_ns()
        for i in range(per):
            waited += take(m * per + i)
        data_ns += time.monotonic_ns() - d0
        check(rt.cudaEventRecordWithFlags(events[2 * m], stream, 0))
        for _ in range(micro):
            launch(stream, 100)  # forward and backward
        if m == 1:
            for _ in range(opt):
                launch(stream, 100, optim_kernel)  # optimizer.step()
        check(rt.cudaEventRecordWithFlags(events[2 * m + 1], stream, 0))
    check(rt.cudaMemcpyAsync(loss, dev_loss, 4, D2H, stream))  # loss.item()
    check(rt.cudaStreamSynchronize(stream))
    compute = elapsed(events[0], events[1]) + elapsed(events[2], events[3])
    return (data_ns - waited) / 1e9, compute, waited / 1e9


def polled_step():
    t0 = time.monotonic_ns()
    while pool.qsize() < args.batch:
        time.sleep(0.002)
    d0 = time.monotonic_ns()
    polled = 0  # polling again: a key counted but not yet in the pipe
    for i in range(args.batch):
        while True:
            try:
                key = pool.get_nowait()
                break
            except queue.Empty:
                w0 = time.monotonic_ns()
                time.sleep(0.0005)
                polled += time.monotonic_ns() - w0
        load_sample(key, dev_in.value + i * SAMPLE)
    d1 = time.monotonic_ns()
    check(rt.cudaEventRecordWithFlags(events[0], stream, 0))
    for _ in range(kernels[0]):
        launch(stream, 100)
    check(rt.cudaEventRecordWithFlags(events[1], stream, 0))
    check(rt.cudaMemcpyAsync(loss, dev_loss, 4, D2H, stream))  # loss.item()
    check(rt.cudaStreamSynchronize(stream))
    compute = elapsed(events[0], events[1])
    return (d1 - d0 - polled) / 1e9, compute, (d0 - t0 + polled) / 1e9


time.sleep(args.start_delay)
if args.shape == "sync":
    batches = iter(DataLoader(make_batch, num_workers=2, prefetch_factor=2, pin_memory=True))
else:
    go.set()
step_fn = dict(sync=sync_step, accum=accum_step, polled=polled_step)[args.shape]

with open(args.truth, "w") as out:
    prev_end = 0
    for step in range(args.steps):
        t_start = time.monotonic_ns()
        data_time, compute_time, dispatch_wait = step_fn()
        t_end = time.monotonic_ns()
        step_time = (t_end - t_start) / 1e9 - dispatch_wait
        out.write(json.dumps(dict(
            step=step, t_start_ns=t_start, t_end_ns=t_end,
            step_time=step_time, data_time=data_time, compute_time=compute_time, dispatch_wait=dispatch_wait,
            train_capacity=args.batch / step_time, thru=args.batch * 1e9 / (t_end - (prev_end or t_start)),
            pool=(batches._data_queue if args.shape == "sync" else pool).qsize())) + "\n")
        out.flush()
        prev_end = t_end

if args.shape == "sync":
    batches.shutdown()
else:
    done.set()
    for e in engines:
        e.join(timeout=5)
print(json.dumps({"shape": args.shape, "mode": args.mode, "steps": args.steps}), flush=True)
