"""On the GPU host: a PyTorch Lightning Trainer over a DataLoader (two
workers, pinned memory), logging its own truth from a Callback
(spec_pipeline.py's fields): a step runs from the previous
on_train_batch_end to this one, its data phase up to on_train_batch_start
(Lightning fetches the batch before it); the callback reads the loss
(loss.item(), as a progress bar does).

  python3 lightning_loop.py --mode data|compute --truth T [--steps N]
"""
import argparse, json, os, time

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

p = argparse.ArgumentParser()
p.add_argument("--mode", choices=["data", "compute"], default="data")
p.add_argument("--steps", type=int, default=100000)
p.add_argument("--truth", default="truth.jsonl")
args = p.parse_args()

HID, BATCH = 2048, 8
item_ms, depth = dict(data=(3.0, 4), compute=(0.05, 40))[args.mode]


class Samples(Dataset):
    def __len__(self):
        return 1 << 30

    def __getitem__(self, i):
        end = time.monotonic() + item_ms / 1e3
        while time.monotonic() < end:
            pass
        return torch.full((64, HID), float(i % 7))


class Net(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(*[torch.nn.Linear(HID, HID) for _ in range(depth)])

    def training_step(self, x, i):
        return self.net(x).square().mean()

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-5)


class Truth(L.Callback):
    def __init__(self, path):
        self.out, self.prev_end, self.begin, self.n = open(path, "w"), 0, 0, 0

    def on_train_batch_start(self, trainer, module, batch, i):
        self.begin = time.monotonic_ns()

    def on_train_batch_end(self, trainer, module, outputs, batch, i):
        loss = outputs["loss"].item()
        end = time.monotonic_ns()
        start = self.prev_end or self.begin
        step_time = (end - start) / 1e9
        self.out.write(json.dumps(dict(step=self.n, t_start_ns=start, t_end_ns=end, step_time=step_time,
                                       data_time=(self.begin - start) / 1e9, dispatch_wait=0.0,
                                       train_capacity=BATCH / step_time, loss=loss)) + "\n")
        self.out.flush()
        self.prev_end, self.n = end, self.n + 1


loader = DataLoader(Samples(), batch_size=BATCH, num_workers=2, pin_memory=True)
trainer = L.Trainer(max_steps=args.steps, accelerator="gpu", devices=1, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, precision="bf16-mixed",
                    callbacks=[Truth(args.truth)])
trainer.fit(Net(), loader)
os._exit(0)
