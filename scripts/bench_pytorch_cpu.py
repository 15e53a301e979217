#!/usr/bin/env python3
"""PyTorch CPU baseline for headwise's training benchmark config.

Same shape as the headwise benchmark: GPT-2 style (configs/bench_cpu_small.json), pre-LN, 4 layers,
n_embd 256, 4 heads, vocab 256, block 256, T 256, micro-batch 8, fp32, causal SDPA, tanh GELU, tied
embeddings; or with --family llama its Llama-style twin (configs/bench_cpu_small_llama.json:
RMSNorm, SwiGLU 688, RoPE, GQA 4:2, vocabulary 32,000, tied; pytorch_llama.py). AdamW (lr 6e-4,
betas 0.9/0.95, weight decay 0.1 on matrices only, as nanoGPT does), grad-norm clip 1.0.
Random tokens. Prints ONE JSON line: {"impl":"pytorch","ms_per_step":...,"tok_per_s":...,"threads":...}.
"""
import argparse
import json
import os
import resource
import sys
import time

import torch

from pytorch_gpt import GPT
from pytorch_llama import Llama

BLOCK, N_EMBD, N_HEAD, N_LAYER = 256, 256, 4, 4
VOCAB = {"gpt2": 256, "llama": 32000}


def rss_now_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=20, help="timed steps")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--compile", action="store_true", help="wrap the model in torch.compile")
    ap.add_argument("--family", choices=["gpt2", "llama"], default="gpt2")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    rss_before_model = rss_now_bytes()
    torch.manual_seed(0)
    vocab = VOCAB[args.family]
    if args.family == "llama":
        model = Llama(vocab, BLOCK, N_LAYER, N_EMBD, N_HEAD, n_kv_head=2, inter=688)
    else:
        model = GPT(vocab, BLOCK, N_LAYER, N_EMBD, N_HEAD)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
    step_fn = model
    compiled = False
    if args.compile:
        try:
            step_fn = torch.compile(model)
            compiled = True
        except Exception as e:  # report and fall back to eager
            print(f"torch.compile failed: {type(e).__name__}: {e}", file=sys.stderr)

    gen = torch.Generator().manual_seed(1)
    data = torch.randint(0, vocab, (args.warmup + args.steps, args.batch, args.seq + 1), generator=gen)

    def train_step(i):
        x, y = data[i, :, :-1], data[i, :, 1:]
        loss = step_fn(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    try:
        for i in range(args.warmup):
            train_step(i)
    except Exception as e:
        if not compiled:
            raise
        print(f"torch.compile failed at run time: {type(e).__name__}: {e}; using eager", file=sys.stderr)
        step_fn, compiled = model, False
        for i in range(args.warmup):
            train_step(i)

    t0 = time.perf_counter()
    for i in range(args.warmup, args.warmup + args.steps):
        loss = train_step(i)
    loss.item()
    dt = (time.perf_counter() - t0) / args.steps
    print(json.dumps({"impl": "pytorch" + ("-compile" if compiled else ""), "family": args.family,
                      "ms_per_step": round(dt * 1e3, 2),
                      "tok_per_s": round(args.batch * args.seq / dt, 1), "threads": args.threads,
                      "batch": args.batch, "seq": args.seq, "steps": args.steps,
                      "final_loss": round(loss.item(), 4), "torch": torch.__version__,
                      # The process's peak (Linux reports ru_maxrss in KiB) and its resident size
                      # once torch was imported, before the model existed: the libraries' share.
                      "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "rss_before_model_bytes": rss_before_model}))


if __name__ == "__main__":
    main()
