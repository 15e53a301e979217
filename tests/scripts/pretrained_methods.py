#!/usr/bin/env python3
"""Independent references for the methods on transformers-made Llama/Qwen2/Qwen3 models
(tests/scripts/test_pretrained_methods.sh).

aoh FIXTURE HEADS_JSON: every query head's effective rank exp(-sum p log p), p = sigma / sum sigma,
  of sigma = the singular values of W_K^g^T W_Q^h from a full float64 SVD (torch.linalg.svdvals)
  of the transformers model's q_proj/k_proj weights, against `headwise heads --json`.
saf FIXTURE CONVERT_JSON SHARD: the calibration windows SAF drew (headwise's CalibSampler, rebuilt
  here from its seed), transformers' own attention probabilities on them (eager attention:
  post-q/k-norm, post-RoPE, rope scaling included), the variance statistic (Eq. 1: sum over cells
  of the unbiased sample variance / T^2) and the forward-KL statistic of every head computed
  directly, and the heads the selector would pick (lowest k = round(ratio L H), ties by flat
  index), against `headwise convert --method saf`'s report.
outliers FIXTURE OUT: FIXTURE with outlier dimensions planted in layer 0's query head 0 and its KV
  head (q and k channels 0 and 1 scaled by 8, as pretrained models' massive q/k dimensions).
oal CONVERT_JSON: the held-out RelMSE of OAL's calibrated L on layer 0 head 0 is below that of its
  Taylor initialisation (the report's numbers, on the head with the planted outliers).
Prints one JSON line; exits 1 on a mismatch.
"""
import json
import math
import struct
import sys

import torch
from transformers import AutoModelForCausalLM

M64 = (1 << 64) - 1


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def derive_seed(seed, stream, index):
    a = mix64((seed + 0x9E3779B97F4A7C15 * stream) & M64)
    return mix64(a ^ mix64((index + 0xD1B54A32D192ED03) & M64))


class Rng:  # xoshiro256** seeded by splitmix64 (src/core/rng.cpp)
    def __init__(self, seed):
        x, self.s = seed, []
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & M64
            self.s.append(mix64(x))

    def next_u64(self):
        rotl = lambda v, k: ((v << k) | (v >> (64 - k))) & M64
        s = self.s
        result = (rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result

    def below(self, n):
        limit = M64 - M64 % n
        while True:
            x = self.next_u64()
            if x < limit:
                return x % n


def tokens(shard):
    data = open(shard, "rb").read()
    header = struct.unpack("<256i", data[:1024])
    return list(struct.unpack(f"<{header[2]}H", data[1024:1024 + 2 * header[2]]))


def calib_window(toks, T, seed, index):  # one shard: CalibSampler::fetch
    pick = Rng(derive_seed(seed, 2, index)).below(len(toks) - T)
    return toks[pick:pick + T]


def load(fixture):
    return AutoModelForCausalLM.from_pretrained(fixture, dtype=torch.float32, attn_implementation="eager")


def aoh(fixture, heads_json):
    model = load(fixture)
    cfg = model.config
    H, G = cfg.num_attention_heads, cfg.num_key_value_heads
    d = getattr(cfg, "head_dim", None) or cfg.hidden_size // H
    got = json.load(open(heads_json))
    worst = 0.0
    for layer in got["scores"]["layers"] if "scores" in got else got["layers"]:
        l = layer["layer"]
        attn = model.model.layers[l].self_attn
        wq = attn.q_proj.weight.detach().double()  # [H d, C]
        wk = attn.k_proj.weight.detach().double()  # [G d, C]
        for hj in layer["heads"]:
            h = hj["head"]
            g = h // (H // G)
            m = wk[g * d:(g + 1) * d].T @ wq[h * d:(h + 1) * d]  # W_K^T W_Q, C x C
            sigma = torch.linalg.svdvals(m)
            p = sigma / sigma.sum()
            p = p[p > 0]
            erank = math.exp(-(p * p.log()).sum().item())
            worst = max(worst, abs(erank - hj["effective_rank"]) / erank)
    print(json.dumps({"aoh_max_rel_err": worst}))
    return worst < 1e-6


def saf(fixture, convert_json, shard):
    rec = json.load(open(convert_json))
    rep = rec["report"]
    T, N, seed = rep["calib_seq_len"], rep["calib_seqs"], rep["seed"]
    model = load(fixture)
    toks = tokens(shard)
    x = torch.tensor([calib_window(toks, T, seed, i) for i in range(N)])
    with torch.no_grad():
        att = model(x, output_attentions=True).attentions  # per layer [N, H, T, T]
    L, H = len(att), att[0].shape[1]
    var, kl = {}, {}
    for l in range(L):
        a = att[l].double()
        v = a.var(dim=0, unbiased=True).sum(dim=(-1, -2)) / (T * T)  # [H]
        xlogx = lambda p: torch.where(p > 0, p * p.clamp_min(1e-300).log(), torch.zeros_like(p))
        mean = a.mean(dim=0)
        k = xlogx(a).sum(dim=(-1, -2)).mean(dim=0) / T - xlogx(mean).sum(dim=(-1, -2)) / T
        for h in range(H):
            var[(l, h)], kl[(l, h)] = v[h].item(), max(k[h].item(), 0.0)
    score = var if rep["selector"] == "variance" else kl
    count = round(rep["ratio"] * L * H)  # Python's round: halves to even, as SAF's quota
    order = sorted(score, key=lambda lh: (score[lh], lh[0] * H + lh[1]))
    want = sorted(order[:count])
    got = sorted(tuple(s) for s in rep["selected"])
    worst = 0.0
    for hj in rep["heads"]:
        mine = score[(hj["layer"], hj["head"])]
        theirs = hj["scores"][rep["selector"]]
        worst = max(worst, abs(mine - theirs) / max(abs(mine), 1e-12))
    print(json.dumps({"selector": rep["selector"], "want": want, "got": got, "score_max_rel_err": worst}))
    return want == got and worst < 1e-3


def outliers(fixture, out):
    model = load(fixture)
    cfg = model.config
    d = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    attn = model.model.layers[0].self_attn
    with torch.no_grad():
        for proj in (attn.q_proj, attn.k_proj):  # head 0 / KV head 0: rows 0 and 1
            proj.weight[0:2] *= 8.0
            if proj.bias is not None:
                proj.bias[0:2] *= 8.0
    model.save_pretrained(out)
    return True


def oal(convert_json):
    rep = json.load(open(convert_json))["report"]
    head = next(h for h in rep["heads"] if h["layer"] == 0 and h["head"] == 0)["calibration"]
    taylor, fitted = head["taylor_val_mse"], head["kernel"]["val_mse"]
    print(json.dumps({"taylor_val_relmse": taylor, "oal_val_relmse": fitted}))
    return fitted < taylor


def main():
    torch.set_num_threads(1)
    cmd = sys.argv[1]
    if cmd == "aoh":
        ok = aoh(*sys.argv[2:4])
    elif cmd == "saf":
        ok = saf(*sys.argv[2:5])
    elif cmd == "outliers":
        ok = outliers(*sys.argv[2:4])
    else:
        ok = oal(sys.argv[2])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
