"""spec_pipeline.py's shape on gpuprof's stand-in CUDA libraries, through
ctypes: inference-engine threads fill a sample pool (queue.Queue), a trainer
takes batches from it, fetches them, copies them in and trains, timing
itself the way AngelSpec does. Writes the same ground truth as
../shared/workloads/spec_pipeline.py, so gpuprof's integration tests can
hold every field to it on any CPython, without a GPU.

  python3 pipeline.py LIBDIR --mode infer --steps 200 --truth truth.jsonl --start-delay 0.5

With --procs the engines are processes that put their samples' keys into a
multiprocessing.Queue (the trainer then makes the sample, as a store fetch
would), and make no CUDA calls (they are forked, and the stand-in's GPU
thread stays in the parent).

With --dataloader mp|pin there are no engines: the trainer takes whole
batches from a DataLoader (standin/torch/utils/data: torch's queues and
names, without torch) whose two worker processes make each batch, with
the fetch's CPU copies; "pin" adds its pin-memory thread. The truth's
data_time is then the time in next(), as AngelSpec counts its data
iterator, and its dispatch_wait zero.

thru is the samples a second the loop realised: the batch over the time
from the previous step's end to this one's (the first step: its own
span), the loop's bookkeeping between steps included. batch over
step_time + dispatch_wait would leave that out and read ~2% high here
(more on a loaded machine).
"""
import argparse, collections, ctypes, json, multiprocessing, os, queue, sys, threading, time

p = argparse.ArgumentParser()
p.add_argument("libdir")
p.add_argument("--mode", default="balanced", choices=["infer", "data", "compute", "balanced"])
p.add_argument("--steps", type=int, default=100)
p.add_argument("--batch", type=int, default=4)
p.add_argument("--engines", type=int, default=3)
p.add_argument("--truth", default="truth.jsonl")
p.add_argument("--start-delay", type=float, default=0.0)
p.add_argument("--native", help="directory of the Mooncake and Ray stand-ins: take samples with "
               "ray::core::CoreWorker::Get and fetch them with mooncake::RealClient::batch_get_into")
p.add_argument("--procs", action="store_true", help="engine processes feeding a multiprocessing.Queue")
p.add_argument("--engine-gpu", action="store_true", help="with --procs: the engine processes run their model on the GPU too")
p.add_argument("--dataloader", choices=["mp", "pin"], help="batches from a DataLoader's worker processes, no engines")
args = p.parse_args()

# engine pause (s), CPU copies per sample fetch, trainer kernels (0.1 ms each)
engine_pause, fetch_copies, kernels = dict(
    infer=(0.02, 1, 30), data=(0.0, 24, 10), compute=(0.0, 1, 100), balanced=(0.004, 8, 30))[args.mode]
SAMPLE = 1 << 20


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


def run_engine_proc(idx, pool, go, done):
    """An engine process: 0.6 ms of work (on the CPU, or with --engine-gpu
    the target model's kernels and the sample's copy back), the pause, then
    a sample with its timing."""
    pool.cancel_join_thread()  # exit without draining what the trainer did not take
    if args.engine_gpu:
        # The stand-in's GPU is a timeline in the library: a forked process
        # loads it and has one of its own.
        grt = ctypes.CDLL(args.libdir + "/libcudart.so.13")
        grt.cudaLaunchKernel.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        grt.cudaMemcpyAsync.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
        grt.cudaStreamSynchronize.argtypes = [ctypes.c_void_p]
        stream, dev = ctypes.c_void_p(), ctypes.c_void_p()
        grt.cudaStreamCreate(ctypes.byref(stream))
        grt.cudaMalloc(ctypes.byref(dev), SAMPLE)
        host = ctypes.create_string_buffer(SAMPLE)
        kernel_id = ctypes.cast(grt.cudaGetLastError, ctypes.c_void_p)
    go.wait()
    n = 0
    while not done.is_set():
        t0 = time.monotonic_ns()
        if args.engine_gpu:
            for _ in range(3):
                grt.cudaLaunchKernel(kernel_id, Dim3(200, 1, 1), Dim3(128, 1, 1), None, 0, stream)
            grt.cudaMemcpyAsync(host, dev, SAMPLE, 2, stream)
            grt.cudaStreamSynchronize(stream)
        while time.monotonic_ns() < t0 + 600_000:
            pass
        time.sleep(engine_pause)
        t1 = time.monotonic_ns()
        try:
            pool.put((t0, t1, idx, n), timeout=1)
        except queue.Full:
            pass
        n += 1


if args.procs:
    ctx = multiprocessing.get_context("fork")
    pool, go, done = ctx.Queue(maxsize=64), ctx.Event(), ctx.Event()
    engines = [ctx.Process(target=run_engine_proc, args=(i, pool, go, done), daemon=True) for i in range(args.engines)]
    for e in engines:
        e.start()

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


def new(fn, *extra):
    h = ctypes.c_void_p()
    check(fn(ctypes.byref(h), *extra))
    return h


def launch(stream, blocks):
    check(rt.cudaLaunchKernel(kernel, Dim3(blocks, 1, 1), Dim3(128, 1, 1), None, 0, stream))


class Store:
    """Host-side store of samples, as Mooncake holds them."""
    def __init__(self):
        self._d, self._lock = {}, threading.Lock()
    def put(self, k, v):
        with self._lock:
            self._d[k] = v
    def take(self, k):
        with self._lock:
            return self._d.pop(k)


store = Store()
if not args.procs:
    pool, done = queue.Queue(maxsize=256), threading.Event()
if args.native:
    ray = ctypes.CDLL(args.native + "/ray/_raylet.so")
    ray.standin_core_worker.restype = ctypes.c_void_p
    ray.standin_ray_put.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong]
    ray.standin_ray_get.argtypes = [ctypes.c_void_p]
    ray.standin_ray_get.restype = ctypes.c_ulonglong
    worker = ray.standin_core_worker()
    mc = ctypes.CDLL(args.native + "/mooncake/store.so")
    mc.standin_mooncake_client.restype = ctypes.c_void_p
    mc.standin_mooncake_client.argtypes = [ctypes.c_double]
    mc.standin_batch_get_into.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p]
    client = mc.standin_mooncake_client(0.5 * fetch_copies)  # ns a byte: 0.5 ms a MiB a copy
    fetched = ctypes.create_string_buffer(SAMPLE)
# The engines' recent iterations (a step reads those since it started):
# bounded, so that the loop's bookkeeping does not grow with the run.
gen_times, gen_lock = collections.deque(maxlen=1024), threading.Lock()


def run_engine(idx):
    stream, dev, n = new(rt.cudaStreamCreate), new(rt.cudaMalloc, SAMPLE), 0
    host = ctypes.create_string_buffer(SAMPLE)
    while not done.is_set():
        t0 = time.monotonic_ns()
        for _ in range(3):
            launch(stream, 200)  # the target model: 0.6 ms of GPU work
        check(rt.cudaMemcpyAsync(host, dev, SAMPLE, D2H, stream))
        check(rt.cudaStreamSynchronize(stream))
        time.sleep(engine_pause)
        t1 = time.monotonic_ns()
        with gen_lock:
            gen_times.append((t0, t1))
        key = (idx, n)
        n += 1
        if args.native:
            ray.standin_ray_put(worker, idx << 32 | n)
            continue
        store.put(key, bytes(host.raw[:64]) * (SAMPLE // 64))
        try:
            pool.put(key, timeout=1)
        except queue.Full:
            store.take(key)


stream = new(rt.cudaStreamCreate)
dev_in = new(rt.cudaMalloc, args.batch * SAMPLE)
dev_loss = new(rt.cudaMalloc, 4)
loss = ctypes.create_string_buffer(4)
begin, end = new(rt.cudaEventCreate), new(rt.cudaEventCreate)


fetch_ns = [0]


def load_sample(key, i):
    if args.procs:
        t0, t1, idx, n = key
        with gen_lock:
            gen_times.append((t0, t1))
        t = bytes([idx & 0xff, n & 0xff]) * (SAMPLE // 2)
        for _ in range(fetch_copies - 1):
            t = bytes(bytearray(t))
        check(rt.cudaMemcpyAsync(dev_in.value + i * SAMPLE, t, SAMPLE, H2D, stream))
        return
    if args.native:
        f0 = time.monotonic_ns()
        mc.standin_batch_get_into(client, 1, SAMPLE, fetched)
        fetch_ns[0] += time.monotonic_ns() - f0
        check(rt.cudaMemcpyAsync(dev_in.value + i * SAMPLE, fetched, SAMPLE, H2D, stream))
        return
    t = store.take(key)
    for _ in range(fetch_copies - 1):
        t = bytes(bytearray(t))  # the fetch: CPU copies of the sample
    check(rt.cudaMemcpyAsync(dev_in.value + i * SAMPLE, t, SAMPLE, H2D, stream))


def make_batch(idx):
    """A DataLoader worker's batch: the samples, and the fetch's CPU copies."""
    data = bytes([idx & 0xff]) * (args.batch * SAMPLE)
    for _ in range(fetch_copies - 1):
        data = bytes(bytearray(data))
    return data


if args.dataloader:
    # Imported at start, as a training script imports torch: a probe on the
    # DataLoader's functions finds them while the job waits to start.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "standin"))
    from torch.utils.data import DataLoader
time.sleep(args.start_delay)
if args.dataloader:
    batches = iter(DataLoader(make_batch, num_workers=2, prefetch_factor=2, pin_memory=args.dataloader == "pin"))
elif args.procs:
    go.set()
else:
    engines = [threading.Thread(target=run_engine, args=(i,), daemon=True) for i in range(args.engines)]
    for e in engines:
        e.start()

with open(args.truth, "w") as out:
    prev_end = 0
    for step in range(args.steps):
        t_start = time.monotonic_ns()
        waited, fetch_ns[0] = 0, 0
        if args.dataloader:
            data = next(batches)
            check(rt.cudaMemcpyAsync(dev_in, data, len(data), H2D, stream))
        for i in range(0 if args.dataloader else args.batch):
            w0 = time.monotonic_ns()
            key = ray.standin_ray_get(worker) if args.native else pool.get()
            waited += time.monotonic_ns() - w0
            load_sample(key, i)
        t_data = time.monotonic_ns()
        check(rt.cudaEventRecordWithFlags(begin, stream, 0))
        for _ in range(kernels):
            launch(stream, 100)
        check(rt.cudaEventRecordWithFlags(end, stream, 0))
        check(rt.cudaMemcpyAsync(loss, dev_loss, 4, D2H, stream))  # loss.item()
        check(rt.cudaStreamSynchronize(stream))
        ms = ctypes.c_float()
        check(rt.cudaEventElapsedTime(ctypes.byref(ms), begin, end))
        t_end = time.monotonic_ns()
        dispatch_wait = waited / 1e9
        step_time = (t_end - t_start) / 1e9 - dispatch_wait
        with gen_lock:
            recent = [t1 - t0 for t0, t1 in gen_times if t1 >= t_start]
        per_call = sum(recent) / len(recent) / 1e9 if recent else 0.0
        out.write(json.dumps(dict(
            step=step, t_start_ns=t_start, t_data_end_ns=t_data, t_end_ns=t_end,
            step_time=step_time, data_time=(t_data - t_start) / 1e9 - dispatch_wait,
            compute_time=ms.value / 1e3, dispatch_wait=dispatch_wait,
            train_capacity=args.batch / step_time, thru=args.batch * 1e9 / (t_end - (prev_end or t_start)),
            infer_batch_time=per_call, infer_capacity=args.engines / per_call if per_call else 0.0,
            pool=(batches._data_queue if args.dataloader else pool).qsize(), **(dict(fetch_time=fetch_ns[0] / 1e9) if args.native else {}))) + "\n")
        out.flush()
        prev_end = t_end

if args.dataloader:
    batches.shutdown()
else:
    done.set()
    for e in engines:
        e.join(timeout=5)
print(json.dumps({"mode": args.mode, "steps": args.steps}), flush=True)
