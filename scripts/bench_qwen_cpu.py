#!/usr/bin/env python3
"""Qwen2.5-0.5B's shape on the CPU: headwise generate against transformers generate, in one run.

Run by scripts/bench_qwen_cpu.sh (it makes the venv). A Qwen2ForCausalLM of Qwen2.5-0.5B's shape
(24 layers, 896 wide, 14 heads, 2 KV heads, 4864 intermediate, vocabulary 151,936, tied head)
with transformers' random init is saved once (float32). Then, per thread count: headwise
`generate` (greedy, --ignore-eos) on a prompt of CONTEXT random ids, its peak RSS (wait4) against
the fp32 weight bytes, prefill ms and decode ms/token; transformers `generate` on the same
weights, prompt and thread count (prefill = generate(1 new token), decode = (generate(NEW) -
generate(1)) / (NEW - 1)); whether both drew the same greedy tokens; and the memory-bandwidth
bound of decoding: the weight bytes and the KV bytes at CONTEXT read per token, divided by the
bandwidth of a STREAM triad (a = b + s c, 3 x 256 MiB arrays, counted as 3 streams) measured in
this run at the same thread count.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import torch


def make_model(out):
    from transformers import Qwen2Config, Qwen2ForCausalLM
    if os.path.exists(os.path.join(out, "config.json")):
        return
    cfg = Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                      num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                      rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True, use_sliding_window=False,
                      bos_token_id=None, eos_token_id=None)
    torch.manual_seed(0)
    Qwen2ForCausalLM(cfg).save_pretrained(out)


def triad_gbps(threads):
    torch.set_num_threads(threads)
    n = 64 << 20  # floats: 256 MiB per array
    a, b, c = torch.empty(n), torch.rand(n), torch.rand(n)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        torch.add(b, c, alpha=3.0, out=a)
        best = min(best, time.perf_counter() - t0)
    return 3 * 4 * n / best / 1e9


def run_headwise(hw, ckpt, prompt_file, new, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_WAIT_POLICY="passive")
    p = subprocess.Popen([hw, "generate", "--checkpoint", ckpt, "--prompt-tokens", prompt_file, "--max-new", str(new),
                          "--temperature", "0", "--ignore-eos"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env)
    out, err = p.communicate()
    if p.returncode != 0:
        sys.exit(f"headwise generate failed: {err.decode()[-2000:]}")
    summary = json.loads(err.decode().strip().splitlines()[-1])
    summary["tokens"] = [int(t) for t in out.decode().split()]
    return summary


def run_transformers(ckpt, prompt, new, threads):
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32).eval()
    ids = torch.tensor([prompt], dtype=torch.long)

    def gen(x, n):
        with torch.inference_mode():
            t0 = time.perf_counter()
            out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n, min_new_tokens=n,
                                 do_sample=False, use_cache=True, pad_token_id=0)
            return (time.perf_counter() - t0) * 1e3, out[0, x.shape[1]:].tolist()

    gen(ids[:, :64], 2)  # warm-up on a short prompt
    prefill, _ = gen(ids, 1)
    total, tokens = gen(ids, new)
    return {"prefill_ms": prefill, "decode_ms_per_token": (total - prefill) / (new - 1), "tokens": tokens}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--headwise", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--context", type=int, default=2048)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--threads", default="1,2")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    ckpt = os.path.join(a.out, "qwen2.5-0.5b-shape")
    make_model(ckpt)
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, 151936, (a.context,), generator=g).tolist()
    prompt_file = os.path.join(a.out, "prompt.txt")
    with open(prompt_file, "w") as f:
        f.write(" ".join(map(str, prompt)) + "\n")
    from safetensors import safe_open
    n_params = 0
    for fn in os.listdir(ckpt):
        if fn.endswith(".safetensors"):
            with safe_open(os.path.join(ckpt, fn), "pt") as f:
                for k in f.keys():
                    n_params += f.get_slice(k).get_shape()[0] * (
                        f.get_slice(k).get_shape()[1] if len(f.get_slice(k).get_shape()) > 1 else 1)
    weight_bytes = 4 * n_params
    kv_bytes = 24 * 2 * 64 * 2 * 4 * a.context  # layers x KV heads x head_dim x (k, v) x fp32 x positions
    rows = []
    for threads in [int(t) for t in a.threads.split(",")]:
        bw = triad_gbps(threads)
        hw = run_headwise(a.headwise, ckpt, prompt_file, a.new, threads)
        tf = run_transformers(ckpt, prompt, a.new, threads)
        bound_ms = (weight_bytes + kv_bytes) / (bw * 1e9) * 1e3
        same = hw["tokens"] == tf["tokens"]
        first_diff = next((i for i, (x, y) in enumerate(zip(hw["tokens"], tf["tokens"])) if x != y), None)
        rows.append({
            "threads": threads,
            "headwise_peak_rss_bytes": hw.get("peak_rss_bytes"),
            "peak_rss_over_fp32_weights": (hw.get("peak_rss_bytes") or 0) / weight_bytes,
            "headwise_prefill_ms": hw["prefill_ms"], "transformers_prefill_ms": tf["prefill_ms"],
            "prefill_speedup": tf["prefill_ms"] / hw["prefill_ms"],
            "headwise_decode_ms_per_token": hw["decode_ms_per_token"],
            "transformers_decode_ms_per_token": tf["decode_ms_per_token"],
            "decode_speedup": tf["decode_ms_per_token"] / hw["decode_ms_per_token"],
            "triad_gb_per_s": bw, "decode_bound_ms": bound_ms,
            "headwise_decode_over_bound": hw["decode_ms_per_token"] / bound_ms,
            "same_greedy_tokens": same, "first_differing_token": first_diff,
        })
    print(json.dumps({"context": a.context, "new_tokens": a.new, "parameters": n_params, "fp32_weight_bytes": weight_bytes,
                      "kv_bytes_at_context": kv_bytes, "rows": rows}, indent=1))
    print(f"\n{'threads':>7} {'RSS/weights':>11} {'prefill ms hw':>13} {'prefill ms tf':>13} {'decode ms hw':>12} "
          f"{'decode ms tf':>12} {'tf/hw':>6} {'bound ms':>9} {'hw/bound':>8} {'triad GB/s':>10} same")
    for r in rows:
        print(f"{r['threads']:>7} {r['peak_rss_over_fp32_weights']:>11.3f} {r['headwise_prefill_ms']:>13.0f} "
              f"{r['transformers_prefill_ms']:>13.0f} {r['headwise_decode_ms_per_token']:>12.1f} "
              f"{r['transformers_decode_ms_per_token']:>12.1f} {r['decode_speedup']:>6.2f} {r['decode_bound_ms']:>9.1f} "
              f"{r['headwise_decode_over_bound']:>8.2f} {r['triad_gb_per_s']:>10.2f} {r['same_greedy_tokens']}")


if __name__ == "__main__":
    main()
