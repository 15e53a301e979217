#!/usr/bin/env python3
"""PyTorch SDPA attention time, forward + backward, for the shapes of headwise's attention bench.

For one layer's attention (B, n_head, T, head_dim), causal: SDPA's flash kernel in bf16 (what a
PyTorch user trains with) and SDPA in fp32 (the precision headwise's CUDA backend stores in this
round; SDPA picks its memory-efficient kernel there). Median of --reps timed runs with CUDA events
after warm-up. Prints one JSON line per dtype.
"""
import argparse
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def time_ms(fn, reps, warmup=5):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_attention_sdpa: no CUDA device")
    for dtype, backend in ((torch.bfloat16, SDPBackend.FLASH_ATTENTION), (torch.float32, SDPBackend.EFFICIENT_ATTENTION)):
        shape = (args.batch, args.heads, args.seq, args.head_dim)
        q, k, v = (torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
        dout = torch.randn(shape, device="cuda", dtype=dtype)

        def fwd_bwd():
            with sdpa_kernel(backend):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            out.backward(dout)

        ms = time_ms(fwd_bwd, args.reps)
        print(json.dumps({"impl": f"sdpa-{backend.name.lower()}", "dtype": str(dtype).replace("torch.", ""),
                          "batch": args.batch, "heads": args.heads, "seq": args.seq, "head_dim": args.head_dim,
                          "fwd_bwd_ms": round(ms, 4)}))


if __name__ == "__main__":
    main()
