"""On the GPU host: a launch-bound training loop in real torch, logging its
own truth (spec_pipeline.py's fields) for overhead.py --job.

  python3 launchbound.py --out DIR [--seconds S] [--steps N]

A 48-layer MLP of width 256 at batch 8, trained with Adam: each step is
~300 small kernels whose GPU time is a fraction of the CPU time that
launches them, so what a probe costs the launching thread lengthens the
step one for one. CUDA events time the GPU work; loss.item() syncs once a
step.
"""
import argparse, json, os, time

import torch

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--seconds", type=float, default=600)
p.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: --seconds alone)")
args = p.parse_args()

gpu = torch.device("cuda")
layers = []
for _ in range(48):
    layers += [torch.nn.Linear(256, 256), torch.nn.ReLU()]
model = torch.nn.Sequential(*layers).to(gpu)
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
x = torch.randn(8, 256, device=gpu)
begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
stop = time.monotonic() + args.seconds
with open(os.path.join(args.out, "truth.jsonl"), "w") as out:
    step = 0
    while time.monotonic() < stop and (args.steps <= 0 or step < args.steps):
        t0 = time.monotonic_ns()
        begin.record()
        loss = model(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        end.record()
        loss.item()
        t1 = time.monotonic_ns()
        out.write(json.dumps(dict(step=step, t_start_ns=t0, t_end_ns=t1, step_time=(t1 - t0) / 1e9,
                                  compute_time=begin.elapsed_time(end) / 1e3, data_time=0.0, dispatch_wait=0.0)) + "\n")
        out.flush()
        step += 1
