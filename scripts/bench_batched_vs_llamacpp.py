#!/usr/bin/env python3
"""Batched decoding: headwise `bench-infer --batch` against llama.cpp's `llama-batched-bench` on
the same weights (issue 54), run by scripts/bench_batched_vs_llamacpp.sh (which builds llama.cpp).

The checkpoint (default: the Qwen2.5-0.5B shape of bench_qwen_cpu.make_model, random weights) is
converted to GGUF exactly as bench_decode_vs_llamacpp.py does (its functions, so the files and
their stamps are shared). Per precision pair (headwise fp32 / llama.cpp F32, headwise bf16 /
llama.cpp F16), context N and batch B, ROUNDS alternating runs:
  (with --shared-prompt, SHARED=1 in the .sh: one prompt per batch on both sides, prefilled once and
  its cache copied to every sequence: llama-batched-bench -pps, bench-infer --shared-prompt; the
  decode steps are the same work, and the AoH row at 8K x 8 takes minutes instead of an hour)
  - llama.cpp: llama-batched-bench -npp N-TG -ntg TG -npl B -c B*N (every sequence its own prompt
    of N - TG random tokens, then TG decode steps of all B together; its KV cache F16, its default);
    S_TG = B * TG / time of the TG steps;
  - headwise: bench-infer --batch B --context N --side all-softmax (prompts of N - TG random
    tokens, then 2 untimed and TG - 2 timed steps of all B together; --kv-cache HW_KV, fp16);
    decode tokens/s = B / mean step time;
medians, and headwise / llama.cpp. Then the AoH row: bench-infer --method aoh (50% of the KV heads
streaming, sink 64, window 256) against all-softmax at AOH_CONTEXT and AOH_BATCH (both sides in
one process, each side's peak RSS from its own start), decode tokens/s, KV bytes and peak RSS,
beside the paper's figures (Autonomy-of-Heads, arXiv 2608.06849: decode per token up to -66.0%,
KV cache -50% at 256K).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_decode_vs_llamacpp import convert, gguf_ready_copy, run, uptime  # noqa: E402

PAIRS = {"fp32": "f32", "bf16": "f16"}  # headwise --weights -> llama.cpp GGUF type


def make_tiny(out):
    """The smoke model: Qwen2-shaped, 2 layers x 64, 4 query heads on 2 KV heads, the test
    tokenizer's 3,257 tokens."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    if os.path.exists(os.path.join(out, "config.json")):
        return
    cfg = Qwen2Config(vocab_size=3257, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                      rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True, use_sliding_window=False,
                      bos_token_id=None, eos_token_id=None)
    torch.manual_seed(0)
    Qwen2ForCausalLM(cfg).save_pretrained(out)


def ints(s):
    return [int(x) for x in s.split(",") if x]


SHARED = False  # --shared-prompt: one prompt prefilled and its cache copied (llama-batched-bench -pps)


def llama_batched(bench, gguf, n, tg, batches, threads):
    """{B: decode tokens/s} from one llama-batched-bench run over every B at context n."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    speeds = {}
    # llama.cpp prints its rows through an asynchronous logger that sometimes loses the last ones
    # at exit (about 1 run in 10 here, exit status 0): rerun for the rows that did not come out.
    for _ in range(4):
        todo = [b for b in batches if b not in speeds]
        if not todo:
            break
        out, err = run([bench, "-m", gguf, "-c", str(max(todo) * n), "-npp", str(n - tg), "-ntg", str(tg),
                        "-npl", ",".join(map(str, todo)), "-t", str(threads), "-tb", str(threads),
                        "--output-format", "jsonl", *(["-pps"] if SHARED else [])], env)
        for line in (out + "\n" + err).splitlines():
            line = line.strip()
            if line.startswith("{") and '"speed_tg"' in line:
                r = json.loads(line)
                speeds.setdefault(r["pl"], r["speed_tg"])
    missing = [b for b in batches if b not in speeds]
    if missing:
        sys.exit(f"bench: llama-batched-bench printed no row for B = {missing} at context {n}:\n{err[-2000:]}")
    return speeds


def headwise_batched(hw, ckpt, n, tg, b, threads, weights, kv, extra=()):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["OMP_NUM_THREADS"] = str(threads)
    out, _ = run([hw, "bench-infer", "--checkpoint", ckpt, "--context", str(n), "--batch", str(b),
                  "--decode-warmup", "2", "--decode-runs", str(tg - 2), "--weights", weights, "--kv-cache", kv,
                  *(["--shared-prompt"] if SHARED else []), *extra], env)
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--headwise", required=True)
    ap.add_argument("--batched-bench", required=True, help="llama.cpp's llama-batched-bench")
    ap.add_argument("--llama-src", required=True)
    ap.add_argument("--ckpt", default="")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", default="")
    ap.add_argument("--contexts", default="")
    ap.add_argument("--tg", default="")
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--hw-kv", default="fp16")
    ap.add_argument("--aoh-context", default="")
    ap.add_argument("--aoh-batch", default="")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--shared-prompt", action="store_true",
                    help="one prompt per batch, prefilled once and its cache copied to every sequence, on both sides "
                         "(llama-batched-bench -pps, bench-infer --shared-prompt): the decode steps are the same "
                         "work, the prefill B times shorter")
    a = ap.parse_args()
    global SHARED
    SHARED = a.shared_prompt
    defaults = dict(batches="1,2", contexts="64,128", tg="8", aoh_context="256", aoh_batch="2") if a.smoke else \
        dict(batches="1,4,16", contexts="512,2048", tg="32", aoh_context="8192", aoh_batch="8")
    batches = ints(a.batches or defaults["batches"])
    contexts = ints(a.contexts or defaults["contexts"])
    tg = int(a.tg or defaults["tg"])
    aoh_n, aoh_b = int(a.aoh_context or defaults["aoh_context"]), int(a.aoh_batch or defaults["aoh_batch"])
    sink, window = (4, 16) if a.smoke else (64, 256)
    os.makedirs(a.out, exist_ok=True)
    ckpt = a.ckpt
    if not ckpt:
        ckpt = os.path.join(a.out, "qwen2-tiny" if a.smoke else "qwen2.5-0.5b-shape")
        if a.smoke:
            make_tiny(ckpt)
        else:
            from bench_qwen_cpu import make_model
            make_model(ckpt)
    hf = gguf_ready_copy(ckpt, a.out, a.tokenizer)
    precisions = [p for p in a.precisions.split(",") if p]
    ggufs = {}
    for p in precisions:
        ggufs[p] = os.path.join(a.out, f"model-{PAIRS[p]}.gguf")
        convert(a.llama_src, hf, ggufs[p], PAIRS[p])
    rows = []
    for p in precisions:
        for n in contexts:
            hw_runs = {b: [] for b in batches}
            ll_runs = {b: [] for b in batches}
            load = []
            for _ in range(a.rounds):
                load.append(uptime())
                for b, s in llama_batched(a.batched_bench, ggufs[p], n, tg, batches, a.threads).items():
                    ll_runs[b].append(s)
                for b in batches:
                    j = headwise_batched(a.headwise, ckpt, n, tg, b, a.threads, p, a.hw_kv, ["--side", "all-softmax"])
                    hw_runs[b].append(j["all_softmax"]["decode_tokens_per_s"])
            for b in batches:
                hw, ll = statistics.median(hw_runs[b]), statistics.median(ll_runs[b])
                rows.append({"precision": p, "llama_type": PAIRS[p].upper(), "context": n, "batch": b,
                             "headwise_tok_s": hw, "llamacpp_tok_s": ll, "ratio": hw / ll if ll > 0 else 0.0,
                             "load": statistics.median(load)})
    aoh = []
    if aoh_n > 0:
        for p in precisions:
            j = headwise_batched(a.headwise, ckpt, aoh_n, tg, aoh_b, a.threads, p, a.hw_kv,
                                 ["--method", "aoh", "--set", "method.sparsity=0.5", "--set", f"method.sink={sink}",
                                  "--set", f"method.window={window}"])
            aoh.append({"precision": p, "context": aoh_n, "batch": aoh_b, "sink": sink, "window": window,
                        "aoh_tok_s": j["plan"]["decode_tokens_per_s"],
                        "softmax_tok_s": j["all_softmax"]["decode_tokens_per_s"],
                        "aoh_kv_bytes_per_seq": j["plan"]["kv_cache_bytes_per_sequence"],
                        "softmax_kv_bytes_per_seq": j["all_softmax"]["kv_cache_bytes_per_sequence"],
                        "aoh_peak_rss": j["plan"]["peak_rss_bytes"], "softmax_peak_rss": j["all_softmax"]["peak_rss_bytes"],
                        "aoh_max_batch": j["plan"]["max_batch_in_budget"],
                        "softmax_max_batch": j["all_softmax"]["max_batch_in_budget"],
                        "budget_bytes": j["memory_budget_bytes"]})
    print(json.dumps({"checkpoint": ckpt, "threads": a.threads, "tg": tg, "hw_kv": a.hw_kv, "rounds": a.rounds,
                      "rows": rows, "aoh": aoh}, indent=1))
    print(f"\ntotal decode tokens/s of B sequences at context N (prompts of N - {tg}, {tg} decode steps), "
          f"{a.threads} threads, KV cache fp16 (headwise --kv-cache {a.hw_kv}), medians of {a.rounds} round(s); "
          f"headwise all-softmax through bench-infer --batch")
    print("| weights | context | B | headwise tok/s | llama.cpp tok/s | headwise/llama.cpp | load |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['precision']} / {r['llama_type']} | {r['context']} | {r['batch']} | {r['headwise_tok_s']:.1f} | "
              f"{r['llamacpp_tok_s']:.1f} | {r['ratio']:.2f} | {r['load']:.1f} |")
    if aoh:
        print(f"\nAoH (50% of KV heads streaming, sink {sink}, window {window}) vs all-softmax, "
              f"B = {aoh_b}, context {aoh_n}; paper (Autonomy-of-Heads, arXiv 2608.06849): "
              f"decode per token up to -66.0%, KV cache -50% (at 256K)")
        print("| weights | AoH tok/s | all-softmax tok/s | decode time per token | KV bytes/seq AoH | all-softmax "
              "| KV change | peak RSS AoH MB | all-softmax MB | RSS change |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in aoh:
            dt = r["softmax_tok_s"] / r["aoh_tok_s"] - 1 if r["aoh_tok_s"] > 0 else float("nan")
            kv = r["aoh_kv_bytes_per_seq"] / r["softmax_kv_bytes_per_seq"] - 1
            rss = r["aoh_peak_rss"] / r["softmax_peak_rss"] - 1
            print(f"| {r['precision']} | {r['aoh_tok_s']:.2f} | {r['softmax_tok_s']:.2f} | {100 * dt:+.1f}% (paper -66.0%) | "
                  f"{r['aoh_kv_bytes_per_seq']} | {r['softmax_kv_bytes_per_seq']} | {100 * kv:+.1f}% (paper -50%) | "
                  f"{r['aoh_peak_rss'] / 1e6:.0f} | {r['softmax_peak_rss'] / 1e6:.0f} | {100 * rss:+.1f}% |")


if __name__ == "__main__":
    main()
