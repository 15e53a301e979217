#!/usr/bin/env python3
"""Greedy generation with Hugging Face transformers' `generate` (KV cache on), timed.

Loads a headwise checkpoint directory (it is a GPT-2 `save_pretrained` directory) with
GPT2LMHeadModel, runs the prompt read from --prompt-tokens, and prints one JSON line: the new
token ids, prefill ms (generate with max_new_tokens=1) and decode ms per token
((generate(max_new) - generate(1)) / (max_new - 1)), medians over --runs after one warm-up.
"""
import argparse
import json
import statistics
import time

import torch
from transformers import GPT2LMHeadModel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--prompt-tokens", required=True)
    ap.add_argument("--max-new", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = GPT2LMHeadModel.from_pretrained(a.checkpoint, torch_dtype=torch.float32).eval()
    with open(a.prompt_tokens) as f:
        prompt = [int(w) for w in f.read().split()]
    ids = torch.tensor([prompt], dtype=torch.long)
    mask = torch.ones_like(ids)

    def gen(n):
        with torch.inference_mode():
            t0 = time.perf_counter()
            out = model.generate(ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                                 use_cache=True, pad_token_id=0)
            return (time.perf_counter() - t0) * 1e3, out[0, len(prompt):].tolist()

    gen(a.max_new)  # warm-up
    full, pre, tokens = [], [], None
    for _ in range(a.runs):
        ms, tokens = gen(a.max_new)
        full.append(ms)
        pre.append(gen(1)[0])
    prefill = statistics.median(pre)
    total = statistics.median(full)
    print(json.dumps({"tokens": tokens, "prefill_ms": prefill, "total_ms": total,
                      "decode_ms_per_token": (total - prefill) / (a.max_new - 1),
                      "torch": torch.__version__, "threads": a.threads}))


if __name__ == "__main__":
    main()
