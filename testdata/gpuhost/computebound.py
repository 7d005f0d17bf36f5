"""On the GPU host: a compute-bound training loop in real torch, logging
its own truth (spec_pipeline.py's fields) for overhead.py --job.

  python3 computebound.py --out DIR [--seconds S]

A 12-layer transformer encoder (width 1024, 16 heads, sequence 512,
batch 16, bf16 autocast) trained with AdamW on synthetic token batches
from a DataLoader with two worker processes and pinned memory: the GPU is
busy nearly all of each ~50-100 ms step, as in a real pretraining job.
CUDA events time the GPU work; loss.item() syncs once a step.
"""
import argparse, json, os, time

import torch
from torch.utils.data import DataLoader, Dataset

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--seconds", type=float, default=600)
args = p.parse_args()

VOCAB, SEQ, BATCH, WIDTH = 32000, 512, 16, 1024


class Tokens(Dataset):
    def __len__(self):
        return 1 << 30

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randint(0, VOCAB, (SEQ + 1,), generator=g)


class LM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, WIDTH)
        layer = torch.nn.TransformerEncoderLayer(WIDTH, 16, 4 * WIDTH, batch_first=True, norm_first=True)
        self.body = torch.nn.TransformerEncoder(layer, 12)
        self.head = torch.nn.Linear(WIDTH, VOCAB)

    def forward(self, x):
        return self.head(self.body(self.emb(x), is_causal=True, mask=mask))


gpu = torch.device("cuda")
mask = torch.nn.Transformer.generate_square_subsequent_mask(SEQ, device=gpu)
model = LM().to(gpu)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
loader = DataLoader(Tokens(), batch_size=BATCH, num_workers=2, pin_memory=True)
begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
stop = time.monotonic() + args.seconds
with open(os.path.join(args.out, "truth.jsonl"), "w") as out:
    step = 0
    batches = iter(loader)
    while time.monotonic() < stop:
        t0 = time.monotonic_ns()
        tokens = next(batches).to(gpu, non_blocking=True)
        t_data = time.monotonic_ns()
        begin.record()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB).float(), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        end.record()
        loss.item()
        t1 = time.monotonic_ns()
        out.write(json.dumps(dict(step=step, t_start_ns=t0, t_end_ns=t1, step_time=(t1 - t0) / 1e9,
                                  compute_time=begin.elapsed_time(end) / 1e3, data_time=(t_data - t0) / 1e9,
                                  dispatch_wait=0.0)) + "\n")
        out.flush()
        step += 1
