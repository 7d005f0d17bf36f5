"""On the GPU host: training loops of the shapes gpuprof must cut right
(issue 25), in real torch, each logging its own truth as JSON lines with
CLOCK_MONOTONIC stamps (spec_pipeline.py's fields).

  python3 loops.py --shape sync|accum|polled --mode data|compute|infer --truth T [--seconds S]

sync    a plain supervised loop over a DataLoader (2 worker processes,
        pinned memory), torch.cuda.synchronize() after the copy in and
        after the optimizer step, no CUDA events: data_time is next() and
        the copy, compute_time the time between the two syncs.
accum   gradient accumulation: two micro-batches a step, each taking its
        samples from a multiprocessing queue that engine processes fill,
        copying them in and timing its forward/backward (the second one's
        with the optimizer) with CUDA events; one loss.item() a step.
polled  a controller that polls the pool's qsize() in a sleep loop until
        a batch is there, then takes it with gets that never block
        (AngelSpec's try_dispatch_batch): the polling is dispatch_wait.
"""
import argparse, json, multiprocessing as mp, os, queue, time

import torch
from torch.utils.data import DataLoader, Dataset

p = argparse.ArgumentParser()
p.add_argument("--shape", choices=["sync", "accum", "polled"], required=True)
p.add_argument("--mode", choices=["data", "compute", "infer"], default="data")
p.add_argument("--seconds", type=float, default=40)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--truth", default="truth.jsonl")
args = p.parse_args()

HID = 2048
# CPU cost of a sample (ms), model depth, engine pause (s)
item_ms, depth, engine_pause = dict(data=(2.5, 4, 0.0), compute=(0.05, 40, 0.0), infer=(0.05, 6, 0.02))[args.mode]
gpu = torch.device("cuda")


def busy(ms):
    end = time.monotonic() + ms / 1e3
    while time.monotonic() < end:
        pass


class Samples(Dataset):
    def __len__(self):
        return 1 << 30

    def __getitem__(self, i):
        busy(item_ms)  # the worker's CPU, as decoding would be
        return torch.full((64, HID), float(i % 7), dtype=torch.bfloat16)


def engine(idx, q, stop):
    """An engine process: makes a sample key every so often (CPU only)."""
    q.cancel_join_thread()
    n = 0
    while not stop.is_set():
        busy(0.3)
        if engine_pause:
            time.sleep(engine_pause)
        try:
            q.put((idx, n), timeout=1)
        except queue.Full:
            pass
        n += 1


model = torch.nn.Sequential(*[torch.nn.Linear(HID, HID) for _ in range(depth)]).to(gpu, torch.bfloat16)
optim = torch.optim.AdamW(model.parameters(), lr=1e-5)


def sample_of(key):
    """The store fetch: the sample's bytes made and copied on the CPU."""
    t = torch.full((64, HID), float(key[1] % 7), dtype=torch.bfloat16)
    busy(item_ms)
    return t


def step_log(out, step, t_start, t_end, data, compute, wait, extra=None):
    step_time = (t_end - t_start) / 1e9 - wait
    row = dict(step=step, t_start_ns=t_start, t_end_ns=t_end, step_time=step_time, data_time=data,
               compute_time=compute, dispatch_wait=wait, train_capacity=args.batch / step_time)
    row.update(extra or {})
    out.write(json.dumps(row) + "\n")
    out.flush()


def run_sync(out):
    loader = DataLoader(Samples(), batch_size=args.batch, num_workers=2, pin_memory=True)
    it = iter(loader)
    deadline, step = time.monotonic() + args.seconds, 0
    while time.monotonic() < deadline:
        t_start = time.monotonic_ns()
        x = next(it).to(gpu, non_blocking=True)
        torch.cuda.synchronize()
        t_data = time.monotonic_ns()
        loss = model(x).float().square().mean()
        loss.backward()
        optim.step()
        optim.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        t_end = time.monotonic_ns()
        step_log(out, step, t_start, t_end, (t_data - t_start) / 1e9, (t_end - t_data) / 1e9, 0.0)
        step += 1


def engines(n):
    ctx = mp.get_context("fork")
    q, stop = ctx.Queue(maxsize=256), ctx.Event()
    procs = [ctx.Process(target=engine, args=(i, q, stop), daemon=True) for i in range(n)]
    for pr in procs:
        pr.start()
    return q, stop


def run_accum(out):
    q, stop = engines(3)
    deadline, step, prev_end = time.monotonic() + args.seconds, 0, 0
    micro = args.batch // 2
    while time.monotonic() < deadline:
        t_start = time.monotonic_ns()
        waited, data, evs = 0, 0, []
        for mb in range(2):
            m0 = time.monotonic_ns()
            rows = []
            for _ in range(micro):
                w0 = time.monotonic_ns()
                key = q.get()
                waited += time.monotonic_ns() - w0
                rows.append(sample_of(key))
            x = torch.cat(rows).pin_memory().to(gpu, non_blocking=True)
            m1 = time.monotonic_ns()
            data += m1 - m0
            b, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            b.record()
            loss = model(x).float().square().mean() / 2
            loss.backward()
            if mb == 1:
                optim.step()
                optim.zero_grad(set_to_none=True)
            e.record()
            evs.append((b, e))
        loss.item()
        compute = sum(b.elapsed_time(e) for b, e in evs) / 1e3
        t_end = time.monotonic_ns()
        wait = waited / 1e9
        step_log(out, step, t_start, t_end, (data - waited) / 1e9, compute, wait,
                 dict(thru=args.batch * 1e9 / (t_end - (prev_end or t_start))))
        prev_end = t_end
        step += 1
    stop.set()


def run_polled(out):
    q, stop = engines(3)
    deadline, step, prev_end = time.monotonic() + args.seconds, 0, 0
    while time.monotonic() < deadline:
        t_start = time.monotonic_ns()
        while q.qsize() < args.batch:  # try_dispatch_batch
            time.sleep(0.002)
        t_got = time.monotonic_ns()
        rows, polled = [], 0
        for _ in range(args.batch):
            while True:
                try:
                    key = q.get_nowait()
                    break
                except queue.Empty:  # qsize() counts items the engine's feeder thread has not yet written
                    w0 = time.monotonic_ns()
                    time.sleep(0.002)
                    polled += time.monotonic_ns() - w0
            rows.append(sample_of(key))
        x = torch.cat(rows).pin_memory().to(gpu, non_blocking=True)
        t_data = time.monotonic_ns()
        b, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        b.record()
        loss = model(x).float().square().mean()
        loss.backward()
        optim.step()
        optim.zero_grad(set_to_none=True)
        e.record()
        loss.item()
        compute = b.elapsed_time(e) / 1e3
        t_end = time.monotonic_ns()
        wait = (t_got - t_start + polled) / 1e9
        step_log(out, step, t_start, t_end, (t_data - t_got - polled) / 1e9, compute, wait,
                 dict(thru=args.batch * 1e9 / (t_end - (prev_end or t_start)), pool=q.qsize()))
        prev_end = t_end
        step += 1
    stop.set()


with open(args.truth, "w") as out:
    dict(sync=run_sync, accum=run_accum, polled=run_polled)[args.shape](out)
print(json.dumps({"shape": args.shape, "mode": args.mode}), flush=True)
os._exit(0)  # DataLoader workers and engines go with the loop
