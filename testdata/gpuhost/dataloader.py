"""On the GPU host: a training loop fed by a real torch DataLoader (worker
processes, pinned memory), logging its own truth in spec_pipeline.py's
fields, to check gpuprof's DataLoader presets against real torch.

  python3 testdata/gpuhost/dataloader.py --mode data|compute --truth T [--steps N] [--start-delay S]

data: each sample costs its worker --item-ms of CPU, so the loop waits in
the DataLoader; compute: samples are cheap and the model deep.
"""
import argparse, json, time

import torch
from torch.utils.data import DataLoader, Dataset

p = argparse.ArgumentParser()
p.add_argument("--mode", choices=["data", "compute"], default="data")
p.add_argument("--steps", type=int, default=400)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--workers", type=int, default=2)
p.add_argument("--truth", default="truth.jsonl")
p.add_argument("--start-delay", type=float, default=0.0)
args = p.parse_args()

HID = 2048
item_ms, depth = dict(data=(3.0, 4), compute=(0.1, 48))[args.mode]


class Samples(Dataset):
    def __len__(self):
        return 1 << 30

    def __getitem__(self, i):
        end = time.monotonic() + item_ms / 1e3
        while time.monotonic() < end:  # the worker's CPU, as decoding would be
            pass
        return torch.full((64, HID), float(i % 7), dtype=torch.bfloat16)


gpu = torch.device("cuda")
model = torch.nn.Sequential(*[torch.nn.Linear(HID, HID) for _ in range(depth)]).to(gpu, torch.bfloat16)
optim = torch.optim.AdamW(model.parameters(), lr=1e-5)
loader = DataLoader(Samples(), batch_size=args.batch, num_workers=args.workers, pin_memory=True)
time.sleep(args.start_delay)
it = iter(loader)
with open(args.truth, "w") as out:
    for step in range(args.steps):
        t_start = time.monotonic_ns()
        x = next(it).to(gpu, non_blocking=True)
        t_data = time.monotonic_ns()
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        loss = model(x).float().square().mean()
        loss.backward()
        optim.step()
        optim.zero_grad(set_to_none=True)
        end.record()
        loss_value = loss.item()
        t_end = time.monotonic_ns()
        step_time = (t_end - t_start) / 1e9
        out.write(json.dumps(dict(
            step=step, t_start_ns=t_start, t_data_end_ns=t_data, t_end_ns=t_end,
            step_time=step_time, data_time=(t_data - t_start) / 1e9,
            compute_time=begin.elapsed_time(end) / 1e3, dispatch_wait=0.0,
            train_capacity=args.batch / step_time, loss=loss_value)) + "\n")
        out.flush()
print(json.dumps({"mode": args.mode, "steps": args.steps}), flush=True)
