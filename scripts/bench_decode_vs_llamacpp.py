#!/usr/bin/env python3
"""headwise generate against llama.cpp on the same weights (issue 41), run by
scripts/bench_decode_vs_llamacpp.sh (which fetches and builds llama.cpp).

The checkpoint (default: a GPT-2 124M-shaped model with transformers' random init, vocabulary
3,257 = the gpt2-style test tokenizer) is converted to GGUF by llama.cpp's own
convert_hf_to_gguf.py, which needs things a headwise/transformers checkpoint may lack:
  - config.json's `n_ctx` (old GPT-2 configs had it; transformers now writes only n_positions),
  - a pre-tokenizer name: the converter hashes the tokenizer's output on a test string and knows
    only published tokenizers' hashes; ours is byte-level GPT-2 style, so we name it "gpt-2",
  - bos/eos ids inside the vocabulary (llama.cpp checks special ids against it),
  - a top-level `rope_theta`: the converter of 2025-08 reads the config through transformers,
    whose version 5 keeps it inside `rope_parameters`; the converter then writes no
    rope.freq_base and llama.cpp uses 10,000 (a Qwen2.5-shaped model's greedy tokens parted from
    transformers' at the second). The shim below copies it to the top.
Then per thread count and precision pair (headwise fp32 / llama.cpp F32, headwise bf16 /
llama.cpp F16 when headwise has --weights), ROUNDS alternating runs of both on the same prompt
of PROMPT random ids + NEW greedy tokens: prefill tok/s, decode tok/s, peak RSS (wait4), the
GB/s of weights + KV read per decode token, the ratio headwise/llama.cpp, and whether the greedy
tokens agree. Both caches are fp16 by default (llama.cpp's default; headwise's --kv-cache,
HW_KV to change it). A read bandwidth (sum of a 512 MiB array, torch, same thread count) is measured
in the same run, between the rounds.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time


def uptime():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def make_checkpoint(out, n_positions):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    if os.path.exists(os.path.join(out, "model.safetensors")):
        return
    cfg = GPT2Config(vocab_size=3257, n_positions=n_positions, n_embd=768, n_layer=12, n_head=12,
                     bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    GPT2LMHeadModel(cfg).save_pretrained(out)


def id_view(ckpt, work):
    """CKPT without its tokenizer.json (symlinks), so that headwise generate prints token ids."""
    d = os.path.join(work, "hw_ids_view")
    os.makedirs(d, exist_ok=True)
    for fn in os.listdir(ckpt):
        dst = os.path.join(d, fn)
        if fn != "tokenizer.json" and not os.path.lexists(dst):
            os.symlink(os.path.abspath(os.path.join(ckpt, fn)), dst)
    return d


def gguf_ready_copy(ckpt, work, tokenizer_json):
    """A copy (symlinks) of CKPT with what convert_hf_to_gguf.py needs: config.json's n_ctx and
    in-vocabulary bos/eos ids, a tokenizer (TOKENIZER when CKPT has none)."""
    d = os.path.join(work, "hf_for_gguf")
    os.makedirs(d, exist_ok=True)
    for fn in os.listdir(ckpt):
        src, dst = os.path.abspath(os.path.join(ckpt, fn)), os.path.join(d, fn)
        if fn != "config.json" and not os.path.exists(dst):
            os.symlink(src, dst)
    cfg = json.load(open(os.path.join(ckpt, "config.json")))
    vocab = cfg["vocab_size"]
    cfg.setdefault("n_ctx", cfg.get("n_positions", 1024))
    for k in ("bos_token_id", "eos_token_id"):
        if not isinstance(cfg.get(k), int) or not 0 <= cfg[k] < vocab:
            cfg[k] = 0
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    if not os.path.lexists(os.path.join(d, "tokenizer.json")):
        shutil.copy(tokenizer_json, os.path.join(d, "tokenizer.json"))
    tc = os.path.join(d, "tokenizer_config.json")
    if not os.path.exists(tc):
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": cfg["n_ctx"]}, open(tc, "w"))
    return d


def convert(llama_src, hf_dir, out_file, outtype):
    code = (
        "import sys; sys.argv = sys.argv[1:]; sys.path.insert(0, %r); sys.path.insert(0, %r)\n"
        # mistral_common is imported at the top but used only for Mistral models: empty stand-ins
        "import types, transformers  # (transformers first: it probes for mistral_common itself)\n"
        "for m in ('mistral_common', 'mistral_common.tokens', 'mistral_common.tokens.tokenizers',\n"
        "          'mistral_common.tokens.tokenizers.base', 'mistral_common.tokens.tokenizers.multimodal',\n"
        "          'mistral_common.tokens.tokenizers.tekken', 'mistral_common.tokens.tokenizers.sentencepiece'):\n"
        "    sys.modules[m] = types.ModuleType(m)\n"
        "    for name in ('TokenizerVersion', 'Tekkenizer', 'SentencePieceTokenizer', 'DATASET_MEAN', 'DATASET_STD'):\n"
        "        setattr(sys.modules[m], name, None)\n"
        "import convert_hf_to_gguf as c\n"
        # (llama.cpp of 2026 moved the model classes into its `conversion` package)
        "TextModel = getattr(c, 'TextModel', None) or __import__('conversion').TextModel\n"
        "TextModel.get_vocab_base_pre = lambda self, tok: 'gpt-2'\n"
        "load = c.ModelBase.load_hparams\n"
        "def load_hparams(d, mistral):\n"
        "    h = load(d, mistral)\n"
        "    for cfg in (h, h.get('text_config') or {}):\n"
        "        rope = cfg.get('rope_parameters')\n"
        "        if isinstance(rope, dict) and 'rope_theta' in rope:\n"
        "            cfg.setdefault('rope_theta', rope['rope_theta'])\n"
        "    return h\n"
        "c.ModelBase.load_hparams = staticmethod(load_hparams)\n"
        "c.main()\n" % (os.path.join(llama_src, "gguf-py"), llama_src))
    # A GGUF made from another config.json or by another version of this shim is made again.
    stamp = out_file + ".made-from"
    made_from = open(os.path.join(hf_dir, "config.json")).read() + "\n" + code
    if os.path.exists(out_file) and os.path.exists(stamp) and open(stamp).read() == made_from:
        return
    r = subprocess.run([sys.executable, "-c", code, "convert", hf_dir, "--outfile", out_file, "--outtype", outtype],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench: llama.cpp's convert_hf_to_gguf.py failed on {hf_dir}:\n{r.stderr[-3000:]}")
    with open(stamp, "w") as f:
        f.write(made_from)


def run(cmd, env):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out, err = p.communicate()
    if p.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed:\n{err.decode()[-3000:]}")
    return out.decode(), err.decode()


def run_rss(cmd, env):
    """stdout, stderr and peak RSS bytes of one run (GNU time's %M, the child's ru_maxrss)."""
    t = ["/usr/bin/time", "-f", "HWRSS %M"] + cmd
    out, err = run(t, env)
    lines = err.strip().splitlines()
    rss = next(int(l.split()[1]) * 1024 for l in lines if l.startswith("HWRSS "))
    return out, "\n".join(l for l in lines if not l.startswith("HWRSS ")), rss


def read_gbps(threads):
    import torch
    torch.set_num_threads(threads)
    a = torch.ones(128 << 20)  # 512 MiB
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        a.sum()
        best = min(best, time.perf_counter() - t0)
    return a.numel() * 4 / best / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--headwise", required=True)
    ap.add_argument("--greedy", required=True, help="the llama_greedy binary")
    ap.add_argument("--llama-src", required=True)
    ap.add_argument("--ckpt", default="")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--hw-kv", default="fp16", help="headwise's --kv-cache (llama.cpp's cache is F16)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    ckpt = a.ckpt or os.path.join(a.out, "gpt2-124m-shape")
    if not a.ckpt:
        make_checkpoint(ckpt, 1024)
    cfg = json.load(open(os.path.join(ckpt, "config.json")))
    hf = gguf_ready_copy(ckpt, a.out, a.tokenizer)
    hw_ckpt = id_view(ckpt, a.out)
    from safetensors import safe_open
    # Parameters read per decode token: every matrix and the LM head (wte/embed_tokens when tied;
    # an untied embedding is read one row a token), not the position table or the norms.
    n_mat = 0
    n_all = 0
    shapes = {}
    for fn in sorted(os.listdir(ckpt)):
        if fn.endswith(".safetensors"):
            with safe_open(os.path.join(ckpt, fn), "pt") as f:
                for k in f.keys():
                    shapes[k] = f.get_slice(k).get_shape()
    untied = any(k.endswith("lm_head.weight") for k in shapes) and cfg.get("tie_word_embeddings", True) is False
    for k, shp in shapes.items():
        n = 1
        for d in shp:
            n *= d
        n_all += n
        embedding = "wpe" in k or (untied and ("embed_tokens" in k or k.endswith("wte.weight")))
        if len(shp) == 2 and not embedding:
            n_mat += n
    # GPT-2's keys or the Llama family's; K and V of the KV heads (GQA) per layer and position.
    L = cfg.get("n_layer", cfg.get("num_hidden_layers"))
    heads = cfg.get("n_head", cfg.get("num_attention_heads"))
    C = cfg.get("n_embd", cfg.get("hidden_size"))
    kv_width = cfg.get("num_key_value_heads", heads) * (cfg.get("head_dim") or C // heads)
    help_text = subprocess.run([a.headwise, "generate", "--help"], capture_output=True, text=True).stdout
    has_weights = "--weights" in help_text
    has_kv = "--kv-cache" in help_text
    # (headwise precision, llama.cpp type, weight bytes, llama.cpp's KV bytes: its cache is F16
    # whatever the weights, as llama_context_default_params sets it)
    pairs = {"fp32": ("fp32", "f32", 4, 2), "bf16": ("bf16", "f16", 2, 2)}
    # headwise's cache: the same F16 as llama.cpp's by default (HW_KV=fp32 or bf16 to change it)
    hw_kv = a.hw_kv if has_kv else "fp32"
    precisions = [p for p in a.precisions.split(",") if p == "fp32" or has_weights]
    if len(precisions) < len(a.precisions.split(",")):
        print("bench: this headwise has no --weights option: fp32 only", file=sys.stderr)
    ggufs = {}
    for p in precisions:
        ggufs[p] = os.path.join(a.out, f"model-{pairs[p][1]}.gguf")
        convert(a.llama_src, hf, ggufs[p], pairs[p][1])
    import random
    rng = random.Random(1)
    prompt = [rng.randrange(cfg["vocab_size"]) for _ in range(a.prompt)]
    pf = os.path.join(a.out, "prompt.txt")
    with open(pf, "w") as f:
        f.write(" ".join(map(str, prompt)) + "\n")
    ctx_mean = a.prompt + a.new / 2  # positions a decode step reads, on average
    rows, report = [], []
    for threads in [int(t) for t in a.threads.split(",")]:
        # Both with OpenMP's default wait policy, as a user runs them (llama.cpp's -t is its thread
        # count). A passive wait puts the threads to sleep between parallel regions: a decode step
        # has ~100 of them, and bf16 decode at 2 threads ran at 38-47 tok/s passive against 90-98
        # default or active (llama.cpp's per-op barriers suffer the same way).
        env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
        env["OMP_NUM_THREADS"] = str(threads)
        ll_env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
        for p in precisions:
            hw_prec, ll_type, w_bytes, ll_kv_bytes = pairs[p]
            hw_kv_bytes = 4 if hw_kv == "fp32" else 2
            meas = {"hw": [], "ll": [], "bw": [], "load": []}
            hw_tokens = ll_tokens = None
            for r in range(a.rounds):
                meas["load"].append(uptime())
                cmd = [a.headwise, "generate", "--checkpoint", hw_ckpt, "--prompt-tokens", pf, "--max-new", str(a.new),
                       "--temperature", "0", "--ignore-eos"]
                if has_weights:
                    cmd += ["--weights", hw_prec]
                if has_kv:
                    cmd += ["--kv-cache", hw_kv]
                out, err, rss = run_rss(cmd, env)
                s = json.loads(err.strip().splitlines()[-1])
                hw_tokens = [int(t) for t in out.split()]
                meas["hw"].append((s["prefill_ms"], s["decode_ms_per_token"], rss))
                out, err, rss = run_rss([a.greedy, ggufs[p], pf, str(a.new), str(threads)], ll_env)
                s = json.loads(err.strip().splitlines()[-1])
                ll_tokens = [int(t) for t in out.split()]
                meas["ll"].append((s["prefill_ms"], s["decode_ms_per_token"], rss))
                meas["bw"].append(read_gbps(threads))
            bw = statistics.median(meas["bw"])
            for who, name, wb, kvb, kvn in (("hw", "headwise " + hw_prec, w_bytes, hw_kv_bytes, hw_kv),
                                            ("ll", "llama.cpp " + ll_type.upper(), w_bytes, ll_kv_bytes, "fp16")):
                pre = statistics.median(m[0] for m in meas[who])
                dec = statistics.median(m[1] for m in meas[who])
                rss = statistics.median(m[2] for m in meas[who])
                bytes_tok = n_mat * wb + L * 2 * kv_width * kvb * ctx_mean
                rows.append({"impl": name, "kv": kvn, "threads": threads, "prefill_tok_s": a.prompt / pre * 1e3,
                             "decode_tok_s": 1e3 / dec, "peak_rss_mb": rss / 1e6,
                             "decode_gb_s": bytes_tok / dec / 1e6, "read_bw_gb_s": bw,
                             "load": statistics.median(meas["load"]), "precision": p})
            same = hw_tokens == ll_tokens
            first = next((i for i, (x, y) in enumerate(zip(hw_tokens, ll_tokens)) if x != y), None)
            hw_row, ll_row = rows[-2], rows[-1]
            hw_row["decode_ratio"] = hw_row["decode_tok_s"] / ll_row["decode_tok_s"]
            hw_row["prefill_ratio"] = hw_row["prefill_tok_s"] / ll_row["prefill_tok_s"]
            hw_row["same_tokens"] = same
            hw_row["first_differing_token"] = first
            report.append({"threads": threads, "precision": p, "raw": meas, "same_tokens": same})
    print(json.dumps({"checkpoint": ckpt, "parameters": n_all, "matrix_parameters_read_per_token": n_mat,
                      "prompt": a.prompt, "new": a.new, "rounds": a.rounds, "rows": rows, "raw": report}, indent=1))
    print(f"\nprompt {a.prompt} + {a.new} greedy tokens, medians of {a.rounds} alternating rounds; "
          f"GB/s = (matrix weights + KV at the mean context) per decode token; read BW = 512 MiB sum, same threads")
    print(f"| implementation | KV cache | threads | prefill tok/s | decode tok/s | peak RSS MB | decode GB/s "
          f"| read BW GB/s | hw/llama decode | hw/llama prefill | same greedy tokens | load |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for r in rows:
        print(f"| {r['impl']} | {r['kv']} | {r['threads']} | {r['prefill_tok_s']:.0f} | {r['decode_tok_s']:.1f} | "
              f"{r['peak_rss_mb']:.0f} | {r['decode_gb_s']:.1f} | {r['read_bw_gb_s']:.1f} | "
              f"{r.get('decode_ratio', float('nan')):.2f} | {r.get('prefill_ratio', float('nan')):.2f} | "
              f"{r.get('same_tokens', '')}{'' if r.get('first_differing_token') is None else ' (first differs at ' + str(r['first_differing_token']) + ')'} | "
              f"{r['load']:.1f} |")


if __name__ == "__main__":
    main()
