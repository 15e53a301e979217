#!/usr/bin/env python3
"""PyTorch GPU baseline for headwise's GPU benchmark (issue 5, item 7).

The same model as `headwise bench` on the GPU: GPT-2 (pre-LN, tanh GELU, tied embeddings,
learned positions), by default 124M (12 layers, n_embd 768, 12 heads, vocab 50304: GPT-2's
50257 padded to a multiple of 64, as llm.c and the SAF recipe do), trained with
what a PyTorch user would use: bf16 autocast, SDPA flash attention (causal), torch.compile, fused
AdamW (lr 6e-4, betas 0.9/0.95, weight decay 0.1 on matrices), grad-norm clip 1.0. Random tokens.

Prints ONE JSON line: ms_per_step, tok_per_s, peak_mem_gib, the measured bf16 GEMM rate of the
card and the MFU against it (6 * params * tokens + attention FLOPs, as llm.c counts).
--device cpu with tiny shapes runs the same code path without a GPU (a smoke test of the script).
"""
import argparse
import contextlib
import json
import sys
import time

import torch

from pytorch_gpt import GPT


def measured_bf16_tflops(device, n=8192, reps=10):
    """The card's bf16 GEMM rate on random data (the MFU denominator), median of `reps` products."""
    if device.type != "cuda":
        return float("nan")
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    times.sort()
    return 2 * n**3 / times[len(times) // 2] / 1e12


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=16, help="micro-batch (sequences per step)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first (compilation happens here)")
    ap.add_argument("--n-layer", type=int, default=12)
    ap.add_argument("--n-embd", type=int, default=768)
    ap.add_argument("--n-head", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50304)
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()

    device = torch.device(args.device)
    torch.manual_seed(0)
    model = GPT(args.vocab, args.seq, args.n_layer, args.n_embd, args.n_head).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    fused = device.type == "cuda"
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=fused)
    step_fn, compiled = model, False
    if not args.no_compile:
        try:
            step_fn, compiled = torch.compile(model), True
        except Exception as e:  # report and fall back to eager
            print(f"torch.compile failed: {type(e).__name__}: {e}", file=sys.stderr)

    amp_dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    gen = torch.Generator().manual_seed(1)
    data = torch.randint(0, args.vocab, (args.warmup + args.steps, args.batch, args.seq + 1), generator=gen)
    data = data.to(device)

    def attention_context():
        if device.type != "cuda":  # the CPU smoke test: whatever SDPA picks
            return contextlib.nullcontext()
        return torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION)

    def train_step(i):
        x, y = data[i, :, :-1], data[i, :, 1:]
        with torch.autocast(device_type=device.type, dtype=amp_dtype, enabled=device.type == "cuda"), \
                attention_context():
            loss = step_fn(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for i in range(args.warmup):
        train_step(i)
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for i in range(args.warmup, args.warmup + args.steps):
        loss = train_step(i)
    final = loss.item()  # waits for the last step
    dt = (time.perf_counter() - t0) / args.steps

    tokens = args.batch * args.seq
    # FLOPs per token: 6 per parameter (forward + backward) plus causal attention's QK^T and PV,
    # forward and backward: 6 * n_layer * T * n_embd (half of the dense 12 * L * T * C).
    flops_per_token = 6 * n_params + 6 * args.n_layer * args.seq * args.n_embd
    peak_tflops = measured_bf16_tflops(device)
    achieved = flops_per_token * tokens / dt / 1e12
    print(json.dumps({
        "impl": "pytorch" + ("-compile" if compiled else ""), "device": torch.cuda.get_device_name() if fused else "cpu",
        "seq": args.seq, "batch": args.batch, "params": n_params, "ms_per_step": round(dt * 1e3, 3),
        "tok_per_s": round(tokens / dt, 1), "achieved_tflops": round(achieved, 2),
        "bf16_gemm_tflops": round(peak_tflops, 1) if fused else None, "mfu": round(achieved / peak_tflops, 4) if fused else None,
        "peak_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3) if fused else None,
        "final_loss": round(final, 4), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
