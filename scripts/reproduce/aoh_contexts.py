#!/usr/bin/env python3
"""The contexts AoH's latency table is measured at: 1024, 2048, ... up to the longest one whose
`headwise bench-infer` fits in a fraction of the node's memory, computed from the model's shape.

Usage: aoh_contexts.py CONFIG_JSON MEM_BYTES THREADS [MAX_CONTEXT [FIRST_CONTEXT]]
CONFIG_JSON: a Hugging Face config.json (Llama / Qwen2 / Qwen3). Prints the contexts on stdout
(space-separated) and the choice with its arithmetic on stderr. FIRST_CONTEXT (default 1024) is
the shortest context (tests time a tiny model at 16, 32, 64).

bench-infer's memory at context N (src/cli/cmd_bench_infer.cpp, src/infer/cached_forward.cpp), bounded
from above: the fp32 model (4 bytes per parameter) plus its bf16 copy for --weights bf16 (2 bytes),
and for each of its two decoders (the plan's and all-softmax's; counted as both alive) the fp32 KV
cache of every head kept in full (2 x layers x KV heads x head_dim x N x 4 bytes) and the
per-thread attention scratch of a 64-row prefill chunk (threads x 64 x (N + 64) x 4 bytes), plus
1 GiB for activations, logits and the runtime. The context must also be at most the model's
max_position_embeddings (RoPE's trained range; the decoder's cache holds at most block_size).
"""
import json
import sys

FRACTION = 0.8       # of the node's memory
OVERHEAD = 1 << 30   # activations, logits, allocator and runtime
CHUNK = 64           # prefill rows per chunk (bench-infer's Decoder)


def shape(cfg):
    L, C, H = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    D = cfg.get("head_dim") or C // H
    inter, V = cfg["intermediate_size"], cfg["vocab_size"]
    per_layer = C * H * D + 2 * C * KV * D + H * D * C + 3 * C * inter + 2 * C + H * D + 2 * KV * D
    params = V * C * (1 if cfg.get("tie_word_embeddings", False) else 2) + L * per_layer + C
    return L, KV, D, params, cfg.get("max_position_embeddings", 1 << 62)


def need_bytes(cfg, n, threads):
    L, KV, D, params, _ = shape(cfg)
    per_decoder = 2 * L * KV * D * n * 4 + threads * CHUNK * (n + CHUNK) * 4
    return 6 * params + 2 * per_decoder + OVERHEAD


def main():
    cfg = json.load(open(sys.argv[1]))
    mem, threads = int(sys.argv[2]), int(sys.argv[3])
    cap = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[4] else 1 << 62
    first = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5] else 1024
    budget = FRACTION * mem
    maxpos = shape(cfg)[4]
    gib = lambda b: f"{b / 2**30:.1f} GiB"
    contexts, n = [], first
    while n <= maxpos and n <= cap and need_bytes(cfg, n, threads) <= budget:
        contexts.append(n)
        n *= 2
    if not contexts:
        print(f"error: aoh_contexts: the shortest context {first} " +
              (f"exceeds max_position_embeddings {maxpos}" if first > maxpos else f"exceeds MAX_CONTEXT {cap}" if first > cap
               else f"needs {gib(need_bytes(cfg, first, threads))}, more than {FRACTION:.0%} of the node's {gib(mem)}"),
              file=sys.stderr)
        sys.exit(1)
    last = contexts[-1]
    why = (f"{n} exceeds max_position_embeddings {maxpos}" if n > maxpos else
           f"{n} exceeds MAX_CONTEXT {cap}" if n > cap else
           f"{n} would need {gib(need_bytes(cfg, n, threads))}")
    print(f"aoh: contexts up to {last}: bench-infer needs at most {gib(need_bytes(cfg, last, threads))} there, within "
          f"{FRACTION:.0%} of the node's {gib(mem)} ({threads} threads; {shape(cfg)[3]:,} parameters); {why}",
          file=sys.stderr)
    print(" ".join(str(c) for c in contexts))


if __name__ == "__main__":
    main()
