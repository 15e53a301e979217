#!/usr/bin/env python3
"""Conversions at real model sizes on the CPU (issue 55): each `headwise convert` / `heads` run's
wall time and peak RSS beside the goal and a bound from the machine's own rates.

Run by scripts/bench_convert_cpu.sh (it makes the venv). Models, written once under OUT with
random weights by transformers: a Qwen2.5-0.5B-shaped Qwen2ForCausalLM in float32 (24 layers, 896
wide, 14 heads, 2 KV heads, MLP 4864, vocabulary 151,936, tied) and a Llama-3.2-1B-shaped
LlamaForCausalLM in bfloat16 (16 layers, 2048 wide, 32 heads, 8 KV heads, MLP 8192, vocabulary
128,256, tied, Llama 3 RoPE scaling); a calibration shard of 164,840 random 32-bit token ids.
Each run's peak RSS is the one the program reports (peak_rss_bytes in its JSON line: VmHWM,
whose count starts at exec; a child's ru_maxrss would include this Python process's own peak),
its stages the line `convert` prints on stderr.

Bounds: the FLOPs a run cannot avoid, at the rates this machine reaches at the same thread count
(fp32 and fp64 2048^3 matrix products in torch, best of 3): SAF = the calibration forwards (every
linear layer and each head's causal QK^T and PV over every window) plus each head's QK^T once more
for its statistics; OAL = the forwards of the statistics prompts and the fit and validation
sequences up to the last converted layer's QKV, plus each converted head's float64 products (its
softmax targets: QK^T and PV; its scores; its kernel moments: the cheaper of one [pairs, T] x [T, d]
causal product per sequence and running sums of the 1 + d + d(d+1)/2 quadratic features across
chunks of 64 positions, with G from the run's own report); AoH and heads = reading the attention
weights once (no compute to speak of: the bound is the stored bytes over the read bandwidth).
"""
import argparse
import json
import os
import random
import struct
import subprocess
import sys
import time

import torch

from bench_qwen_cpu import make_model as make_qwen  # the same random Qwen2.5-0.5B-shaped model


def make_llama(out):
    from transformers import LlamaConfig, LlamaForCausalLM
    if os.path.exists(os.path.join(out, "config.json")):
        return
    cfg = LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                      num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=131072,
                      rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
                      rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                      bos_token_id=None, eos_token_id=None)
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)  # built in bf16: never 5 GB of fp32 in this process
    try:
        LlamaForCausalLM(cfg).save_pretrained(out)
    finally:
        torch.set_default_dtype(torch.float32)


def make_calib(path, n=164840, vocab=151936, seed=7):
    if os.path.exists(path):
        return
    rng = random.Random(seed)
    header = [0] * 256
    header[0], header[1], header[2] = 20240520, 2, n  # llm.c shard, version 2: uint32 tokens
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack(f"<{n}I", *[rng.randrange(vocab) for _ in range(n)]))
    os.replace(path + ".tmp", path)


def rate_gflops(dtype, threads, n=2048):
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best / 1e9


def read_gbps(threads):
    torch.set_num_threads(threads)
    x = torch.ones(128 << 20)  # 512 MiB
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - t0)
    return x.numel() * 4 / best / 1e9


def run(cmd, threads):
    """Wall seconds, peak RSS bytes (the program's own peak_rss_bytes), stderr and stdout."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    return wall, summary["peak_rss_bytes"], p.stderr, p.stdout


def stage_line(err):
    lines = [l for l in err.splitlines() if l.startswith("convert: ")]
    return lines[-1][len("convert: "):] if lines else ""


def hf_config(ckpt):
    with open(os.path.join(ckpt, "config.json")) as f:
        return json.load(f)


def linear_flops_per_token(c, layers):
    C, I = c["hidden_size"], c["intermediate_size"]
    H, KV = c["num_attention_heads"], c["num_key_value_heads"]
    d = c.get("head_dim") or C // H
    per_layer = 2 * (C * (H + 2 * KV) * d + H * d * C + 3 * C * I)
    return per_layer * layers


def causal_pairs(T):
    return T * (T + 1) / 2


def stored_bytes(ckpt):
    return sum(os.path.getsize(os.path.join(ckpt, f)) for f in os.listdir(ckpt) if f.endswith(".safetensors"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--headwise", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=4096)
    ap.add_argument("--only", default="saf,oal,aoh,heads", help="which rows to run")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    qwen, llama = os.path.join(a.out, "qwen2.5-0.5b-shape"), os.path.join(a.out, "llama-3.2-1b-shape-bf16")
    calib = os.path.join(a.out, "calib_000000.bin")
    only = set(a.only.split(","))
    if only & {"saf", "oal"}:
        make_qwen(qwen)
        make_calib(calib)
    if only & {"aoh", "heads"}:
        make_llama(llama)
    T, thr = a.seq_len, a.threads
    f32, f64 = rate_gflops(torch.float32, thr), rate_gflops(torch.float64, thr)
    bw = read_gbps(thr)
    rows = []
    glob = os.path.join(a.out, "calib_*.bin")
    hw = a.headwise
    if "saf" in only:
        c = hf_config(qwen)
        L, H, d = c["num_hidden_layers"], c["num_attention_heads"], c["hidden_size"] // c["num_attention_heads"]
        windows = 4
        out = os.path.join(a.out, "out_saf")
        cmd = [hw, "convert", "--checkpoint", qwen, "--out", out, "--method", "saf", "--set",
               f"method.calib_seqs={windows}", "--calib", glob, "--seq-len", str(T)]
        wall, rss, err, _ = run(cmd, thr)
        fwd = windows * T * linear_flops_per_token(c, L) + windows * L * H * 2 * 2 * causal_pairs(T) * d
        moments = windows * L * H * 2 * causal_pairs(T) * d
        rows.append({"row": "convert --method saf (0.5B, 4 windows)", "cmd": cmd, "wall_s": wall, "peak_rss_gb": rss / 1e9,
                     "goal": "<= 480 s, <= 4.5 GB", "met": wall <= 480 and rss <= 4.5e9,
                     "bound_s": (fwd + moments) / (f32 * 1e9), "bound": f"{fwd / 1e12:.1f} + {moments / 1e12:.1f} TFLOP at {f32:.0f} GFLOP/s",
                     "stages": stage_line(err)})
    if "oal" in only:
        c = hf_config(qwen)
        H, d = c["num_attention_heads"], c["hidden_size"] // c["num_attention_heads"]
        first, last, prompts, fit, val = 3, 20, 4, 2, 1
        out = os.path.join(a.out, "out_oal")
        cmd = [hw, "convert", "--checkpoint", qwen, "--out", out, "--method", "oal", "--set",
               f"method.layers={first}-{last}", "--set", f"method.stats_prompts={prompts}", "--set",
               f"method.fit_seqs={fit}", "--set", f"method.val_seqs={val}", "--calib", glob, "--seq-len", str(T)]
        wall, rss, err, _ = run(cmd, thr)
        windows = prompts + fit + val
        # the forwards run layers 0 .. last - 1 whole and the last converted layer up to its QKV
        KV = c["num_key_value_heads"]
        qkv = 2 * c["hidden_size"] * (H + 2 * KV) * d
        fwd = windows * T * (linear_flops_per_token(c, last) + qkv) + windows * last * H * 2 * 2 * causal_pairs(T) * d
        with open(os.path.join(out, "convert.json")) as f:
            report = json.load(f)["report"]
        unit = 2 * causal_pairs(T) * d  # one [T, d] x [d, T] causal product
        fit_flops = 0.0
        feats = 1 + d + d * (d + 1) / 2  # the quadratic kernel's features of a d-wide row
        for h in report["heads"]:
            G = h["grouping"]["n_groups"]
            pairs = (G + 1) * (G + 2) / 2
            # kernel moments, the cheaper of: the pair products over the causal keys, or (what
            # kernel_moments.cpp does) running feature sums across chunks of 64 positions,
            # 4 F (d + 1) per position, plus the pair products within a chunk
            moments = min(pairs * unit, T * (4 * feats * (d + 1) + pairs * (d + 1) * 64))
            fit_flops += (fit + val) * ((2 + 1) * unit + moments)  # targets (QK^T, PV), scores, moments
        rows.append({"row": "convert --method oal, layers 3-20 (0.5B, 4 + 2 + 1 windows)", "cmd": cmd, "wall_s": wall,
                     "peak_rss_gb": rss / 1e9, "goal": "<= 240 s, <= 3.5 GB", "met": wall <= 240 and rss <= 3.5e9,
                     "bound_s": fwd / (f32 * 1e9) + fit_flops / (f64 * 1e9),
                     "bound": f"{fwd / 1e12:.1f} TFLOP fp32 at {f32:.0f} + {fit_flops / 1e12:.1f} TFLOP fp64 at {f64:.0f} GFLOP/s",
                     "stages": stage_line(err)})
    if "aoh" in only or "heads" in only:
        c = hf_config(llama)
        weights = stored_bytes(llama)
        H, KV, C = c["num_attention_heads"], c["num_key_value_heads"], c["hidden_size"]
        attn_bytes = c["num_hidden_layers"] * C * (H + 2 * KV) * c["head_dim"] * 2
        if "aoh" in only:
            out = os.path.join(a.out, "out_aoh")
            cmd = [hw, "convert", "--checkpoint", llama, "--out", out, "--method", "aoh", "--set", "method.sink=64",
                   "--set", "method.window=1024"]
            wall, rss, err, _ = run(cmd, thr)
            out_bytes = stored_bytes(out)
            rows.append({"row": "convert --method aoh (Llama-3.2-1B shape, bf16)", "cmd": cmd, "wall_s": wall,
                         "peak_rss_gb": rss / 1e9, "goal": f"seconds, <= {1.1 * weights / 1e9:.2f} GB (1.1x stored)",
                         "met": wall <= 60 and rss <= 1.1 * weights, "rss_over_weights": rss / weights,
                         "bound_s": (attn_bytes + 2 * weights) / (bw * 1e9),
                         "bound": f"read {attn_bytes / 1e9:.2f} GB + copy {weights / 1e9:.2f} GB at {bw:.0f} GB/s",
                         "stages": stage_line(err), "out_bytes": out_bytes, "in_bytes": weights})
        if "heads" in only:
            cmd = [hw, "heads", "--checkpoint", llama, "--sparsity", "0.5"]
            wall, rss, err, _ = run(cmd, thr)
            rows.append({"row": "heads --sparsity 0.5 (Llama-3.2-1B shape, bf16)", "cmd": cmd, "wall_s": wall,
                         "peak_rss_gb": rss / 1e9, "goal": f"seconds, <= {1.1 * weights / 1e9:.2f} GB (1.1x stored)",
                         "met": wall <= 60 and rss <= 1.1 * weights, "rss_over_weights": rss / weights,
                         "bound_s": attn_bytes / (bw * 1e9), "bound": f"read {attn_bytes / 1e9:.2f} GB at {bw:.0f} GB/s",
                         "stages": ""})
    print(json.dumps({"threads": thr, "seq_len": T, "fp32_gflops": f32, "fp64_gflops": f64, "read_gbps": bw,
                      "cpu": open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": "),
                      "rows": rows}, indent=1))
    print(f"\nthreads {thr}; machine rates (torch, same threads): fp32 {f32:.0f} GFLOP/s, fp64 {f64:.0f} GFLOP/s, "
          f"read {bw:.0f} GB/s\n")
    print("| run | wall | peak RSS | goal | met | bound | bound from | stages (convert's stderr) |")
    print("|---|---:|---:|---|---|---:|---|---|")
    for r in rows:
        print(f"| {r['row']} | {r['wall_s']:.1f} s | {r['peak_rss_gb']:.2f} GB | {r['goal']} | "
              f"{'yes' if r['met'] else 'no'} | {r['bound_s']:.1f} s | {r['bound']} | {r['stages']} |")


if __name__ == "__main__":
    main()
