"""A training loop that replays a captured CUDA graph each step (forward
and backward captured with torch.cuda.graph, the optimizer outside it), as
torch.compile(mode="reduce-overhead") and hand-made graph loops do; it logs
its own steps (step, t_start_ns, t_end_ns, step_time, compute_time) for
gpuprof compare.

    python3 graphloop.py --steps 3000 --truth truth.jsonl
"""
import argparse
import json
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=3000)
p.add_argument("--truth", default="truth.jsonl")
p.add_argument("--width", type=int, default=4096)
p.add_argument("--layers", type=int, default=8)
a = p.parse_args()

torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(a.width, a.width) for _ in range(a.layers)]).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
x = torch.randn(512, a.width, device="cuda")

side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        model(x).square().mean().backward()
torch.cuda.current_stream().wait_stream(side)
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    loss = model(x).square().mean()
    loss.backward()

start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
with open(a.truth, "w") as out:
    prev = time.monotonic_ns()
    for step in range(a.steps):
        x.copy_(torch.randn(512, a.width, device="cuda"))
        start.record()
        graph.replay()
        end.record()
        opt.step()
        l = loss.item()  # the host waits for the step
        now = time.monotonic_ns()
        out.write(json.dumps({"step": step, "t_start_ns": prev, "t_end_ns": now, "step_time": (now - prev) / 1e9,
                              "compute_time": start.elapsed_time(end) / 1e3}) + "\n")
        out.flush()
        prev = now
