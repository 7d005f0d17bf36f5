"""On the GPU host: the Hugging Face Transformers Trainer on a random-init
GPT-2 and synthetic tokens (nothing downloads), two loader workers,
logging its own truth (spec_pipeline.py's fields): a step runs from the
previous on_step_end to this one (a TrainerCallback), its data_time is the
time in the Trainer's data iterator (get_batch_samples, which takes the
step's batches from accelerate's loader: its copy in and the DataLoader
wait for the next batch).

  python3 hf_trainer.py --mode data|compute --truth T [--steps N]

data: each sample costs its worker --item-ms of CPU; compute: a deeper,
wider model and cheap samples.
"""
import argparse, json, os, time

import torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

p = argparse.ArgumentParser()
p.add_argument("--mode", choices=["data", "compute"], default="data")
p.add_argument("--steps", type=int, default=100000)
p.add_argument("--truth", default="truth.jsonl")
args = p.parse_args()

item_ms, layers, width, seq = dict(data=(12.0, 2, 256, 128), compute=(0.05, 12, 1024, 256))[args.mode]
BATCH = 8


class Tokens(Dataset):
    def __len__(self):
        return 1 << 20  # the Trainer's RandomSampler permutes them all up front: 1 << 30 took minutes

    def __getitem__(self, i):
        end = time.monotonic() + item_ms / 1e3
        while time.monotonic() < end:
            pass
        ids = torch.randint(0, 1000, (seq,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids.clone()}


class Truth(TrainerCallback):
    def __init__(self, path):
        self.out, self.prev_end, self.begin, self.n, self.data_ns = open(path, "w"), 0, 0, 0, 0

    def on_step_begin(self, a, state, control, **kw):
        self.begin = time.monotonic_ns()

    def on_step_end(self, a, state, control, **kw):
        end = time.monotonic_ns()
        start = self.prev_end or self.begin
        step_time = (end - start) / 1e9
        self.out.write(json.dumps(dict(step=self.n, t_start_ns=start, t_end_ns=end, step_time=step_time,
                                       data_time=self.data_ns / 1e9, dispatch_wait=0.0,
                                       train_capacity=BATCH / step_time)) + "\n")
        self.out.flush()
        self.prev_end, self.n, self.data_ns = end, self.n + 1, 0


assert hasattr(Trainer, "get_batch_samples"), "this transformers has no Trainer.get_batch_samples to time"


class TimedTrainer(Trainer):
    """The Trainer, its data iterator timed."""
    def get_batch_samples(self, *a, **kw):
        t0 = time.monotonic_ns()
        out = super().get_batch_samples(*a, **kw)
        truth.data_ns += time.monotonic_ns() - t0
        return out


model = GPT2LMHeadModel(GPT2Config(n_layer=layers, n_embd=width, n_head=8, vocab_size=1000, n_positions=seq))
targs = TrainingArguments(output_dir="/tmp/hf-out", max_steps=args.steps, per_device_train_batch_size=BATCH,
                          dataloader_num_workers=2, logging_steps=1, report_to="none", save_strategy="no",
                          disable_tqdm=True, bf16=True, dataloader_pin_memory=True)
truth = Truth(args.truth)
trainer = TimedTrainer(model=model, args=targs, train_dataset=Tokens(), callbacks=[truth])
trainer.train()
os._exit(0)
