"""On a host of two GPUs: spec_pipeline.py's shape spread over processes and
GPUs, each process logging its own truth. An inference engine process on
GPU 0 feeds the trainer ranks through multiprocessing queues (one per
rank); the trainer is one process on GPU 1 (--ranks 1) or two data-parallel
ranks on GPUs 0 and 1 (--ranks 2, NCCL, DistributedDataParallel), started
with torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE) as gpuprof reads
it.

  python3 testdata/gpuhost/multi_pipeline.py --out DIR [--mode data|compute|infer]
      [--ranks 1|2] [--steps N] [--slow-rank R --slow-ms MS] [--start-delay S]

DIR/truth-rank{R}.jsonl: one line a step, spec_pipeline.py's fields (step,
t_start_ns, t_data_end_ns, t_end_ns, step_time, data_time, compute_time,
dispatch_wait, train_capacity, thru, pool) plus rank. DIR/engine.jsonl: one
line an engine iteration (t0_ns, t1_ns), for I. --slow-rank R --slow-ms MS
makes rank R spend MS more of CPU a step preparing its samples: the
straggler gpuprof should name.

Each trainer's samples are tensors through a torch multiprocessing queue:
taking one asks the engine process for its shared memory's descriptor
(multiprocessing.resource_sharer), so a get waits on the engine even when
the queue is full.
"""
import argparse, json, os, queue, sys, time

import torch
import torch.multiprocessing as mp

HID = 2048
MODES = dict(infer=(0.05, 1, 6), data=(0.0, 32, 6), compute=(0.0, 1, 64))  # engine pause, fetch copies, drafter depth


def engine(args, queues, done):
    torch.cuda.set_device(0)
    gpu = torch.device("cuda", 0)
    pause = MODES[args.mode][0]
    target = torch.nn.Sequential(*[torch.nn.Linear(HID, HID) for _ in range(6)]).to(gpu, torch.bfloat16).eval()
    n = 0
    with open(os.path.join(args.out, "engine.jsonl"), "w") as log:
        while not done.is_set():
            t0 = time.monotonic_ns()
            with torch.no_grad():
                hs = target(torch.randn(1024, HID, device=gpu, dtype=torch.bfloat16)).to("cpu")
            time.sleep(pause)
            t1 = time.monotonic_ns()
            log.write(json.dumps(dict(t0_ns=t0, t1_ns=t1)) + "\n")
            try:
                queues[n % len(queues)].put(hs, timeout=1)
            except queue.Full:
                pass
            n += 1


def trainer(rank, args, queues, done):
    world = args.ranks
    device = rank if world > 1 else 1
    torch.cuda.set_device(device)
    gpu = torch.device("cuda", device)
    if world > 1:
        import torch.distributed as dist
        dist.init_process_group("nccl", rank=rank, world_size=world)
    _, copies, depth = MODES[args.mode]
    drafter = torch.nn.Sequential(*[torch.nn.Linear(HID, HID) for _ in range(depth)]).to(gpu, torch.bfloat16)
    model = drafter
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(drafter, device_ids=[device])
    optim = torch.optim.AdamW(model.parameters(), lr=1e-5)
    pool = queues[rank]
    time.sleep(args.start_delay)
    with open(os.path.join(args.out, f"truth-rank{rank}.jsonl"), "w") as out:
        for step in range(args.steps):
            t_start = time.monotonic_ns()
            waited, samples = 0, []
            for _ in range(args.batch):
                w0 = time.monotonic_ns()
                hs = pool.get()
                waited += time.monotonic_ns() - w0
                for _ in range(copies - 1):
                    hs = hs.clone()
                samples.append(hs.pin_memory().to(gpu, non_blocking=True))
                # Freed here, in the data phase. Left to the next
                # `hs = pool.get()`, freeing it (unmapping its shared
                # memory, ~0.7 ms on the H200 host) would fall inside the
                # timer of a get it is no part of.
                del hs
            if rank == args.slow_rank:
                # Preparing its samples takes it longer: CPU work, not a
                # wait (a sleep would read as waiting for samples).
                end = time.perf_counter() + args.slow_ms / 1e3
                while time.perf_counter() < end:
                    pass
            x = torch.cat(samples)
            t_data = time.monotonic_ns()
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            loss = model(x).float().square().mean()
            loss.backward()
            optim.step()
            optim.zero_grad(set_to_none=True)
            end.record()
            loss_value = loss.item()
            compute = begin.elapsed_time(end) / 1e3
            t_end = time.monotonic_ns()
            dispatch_wait = waited / 1e9
            step_time = (t_end - t_start) / 1e9 - dispatch_wait
            out.write(json.dumps(dict(
                step=step, rank=rank, t_start_ns=t_start, t_data_end_ns=t_data, t_end_ns=t_end,
                step_time=step_time, data_time=(t_data - t_start) / 1e9 - dispatch_wait,
                compute_time=compute, dispatch_wait=dispatch_wait,
                train_capacity=args.batch / step_time, thru=args.batch / (step_time + dispatch_wait),
                pool=pool.qsize(), loss=loss_value)) + "\n")
            out.flush()
    if world > 1:
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--mode", choices=sorted(MODES), default="compute")
    p.add_argument("--ranks", type=int, choices=[1, 2], default=2)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-ms", type=float, default=0.0)
    p.add_argument("--start-delay", type=float, default=0.0, help="idle seconds before training, to attach")
    args = p.parse_args()
    if torch.cuda.device_count() < 2:
        sys.exit("multi_pipeline.py needs two GPUs: this host has %d" % torch.cuda.device_count())
    os.makedirs(args.out, exist_ok=True)
    ctx = mp.get_context("spawn")
    queues = [ctx.Queue(maxsize=64) for _ in range(args.ranks)]
    done = ctx.Event()
    procs = [ctx.Process(target=engine, args=(args, queues, done), name="engine")]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29511", WORLD_SIZE=str(args.ranks))
    for rank in range(args.ranks):
        # torchrun's environment, in the rank's own /proc/PID/environ: a
        # spawned process starts with the parent's environment as it is now.
        # torchrun also sets OMP_NUM_THREADS=1 for several ranks a host.
        os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), OMP_NUM_THREADS="1")
        procs.append(ctx.Process(target=trainer, args=(rank, args, queues, done), name=f"rank{rank}"))
        procs[-1].start()
    for k in ("RANK", "LOCAL_RANK", "OMP_NUM_THREADS"):
        os.environ.pop(k)
    procs[0].start()
    print(json.dumps({"pids": {p.name: p.pid for p in procs}}), flush=True)
    for pr in procs[1:]:
        pr.join()
    done.set()
    procs[0].join(timeout=10)
    if procs[0].is_alive():
        procs[0].terminate()
    print(json.dumps({"mode": args.mode, "ranks": args.ranks, "steps": args.steps}), flush=True)


if __name__ == "__main__":
    main()
