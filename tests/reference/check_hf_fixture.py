#!/usr/bin/env python3
"""Second, independent implementation checking tests/fixtures/hf_tiny_gpt2/expected.json and
reference.safetensors.

Plain numpy (no torch, no safetensors package): parses model.safetensors by hand, runs the GPT-2
forward pass in float64 from the formula, and compares the loss and logits; gradient entries are
checked by central finite differences. It also spells out the exact math the C++ model must match.
Run with a python that has numpy (e.g. /usr/bin/python3).
"""
import json
import os
import struct
import sys

import numpy as np

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "hf_tiny_gpt2")


def load_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        dtype = {"F32": "<f4", "F64": "<f8"}[e["dtype"]]
        b, end = e["data_offsets"]
        out[name] = np.frombuffer(data[b:end], dtype=dtype).reshape(e["shape"]).astype(np.float64)
    return out


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)  # biased variance
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def forward(W, ids, cfg):
    p = "transformer."
    B, T = ids.shape
    C, H = cfg["n_embd"], cfg["n_head"]
    D = C // H
    x = W[p + "wte.weight"][ids] + W[p + "wpe.weight"][np.arange(T)]
    mask = np.triu(np.ones((T, T), dtype=bool), k=1)
    for l in range(cfg["n_layer"]):
        q = p + f"h.{l}."
        h = layer_norm(x, W[q + "ln_1.weight"], W[q + "ln_1.bias"], cfg["layer_norm_epsilon"])
        qkv = h @ W[q + "attn.c_attn.weight"] + W[q + "attn.c_attn.bias"]  # Conv1D: [in, out]
        qh, kh, vh = (qkv[..., i * C:(i + 1) * C].reshape(B, T, H, D).transpose(0, 2, 1, 3) for i in range(3))
        s = qh @ kh.transpose(0, 1, 3, 2) / np.sqrt(D)
        s = np.where(mask, -np.inf, s)
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        y = (a @ vh).transpose(0, 2, 1, 3).reshape(B, T, C)
        x = x + y @ W[q + "attn.c_proj.weight"] + W[q + "attn.c_proj.bias"]
        h = layer_norm(x, W[q + "ln_2.weight"], W[q + "ln_2.bias"], cfg["layer_norm_epsilon"])
        h = gelu_tanh(h @ W[q + "mlp.c_fc.weight"] + W[q + "mlp.c_fc.bias"])
        x = x + h @ W[q + "mlp.c_proj.weight"] + W[q + "mlp.c_proj.bias"]
    x = layer_norm(x, W[p + "ln_f.weight"], W[p + "ln_f.bias"], cfg["layer_norm_epsilon"])
    return x @ W[p + "wte.weight"].T  # tied lm_head


def mean_ce(logits, targets):
    m = logits.max(-1, keepdims=True)
    lse = np.log(np.exp(logits - m).sum(-1)) + m[..., 0]
    picked = np.take_along_axis(logits, targets[..., None], -1)[..., 0]
    return float((lse - picked).mean())


def main():
    exp = json.load(open(os.path.join(FIX, "expected.json")))
    cfg = json.load(open(os.path.join(FIX, "config.json")))
    W = load_safetensors(os.path.join(FIX, "model.safetensors"))
    ref = load_safetensors(os.path.join(FIX, "reference.safetensors"))
    ids, tg = np.array(exp["input_ids"]), np.array(exp["targets"])
    logits = forward(W, ids, cfg)
    loss = mean_ce(logits, tg)
    ok = True

    def report(what, err, tol):
        nonlocal ok
        good = err <= tol
        ok &= good
        print(f"{'ok  ' if good else 'FAIL'} {what}: max abs err {err:.3e} (tol {tol:.0e})")

    report("loss_f64", abs(loss - exp["loss_f64"]), 1e-12)
    report("logits_f64 (every row)", np.abs(logits - ref["logits_f64"]).max(), 1e-12)
    report("loss_f32 vs f64", abs(loss - exp["loss_f32"]), 1e-5)
    eps = 1e-6
    for name in ("transformer.wte.weight", "transformer.wpe.weight", "transformer.h.0.attn.c_attn.weight",
                 "transformer.h.0.ln_1.bias", "transformer.h.1.mlp.c_proj.weight", "transformer.ln_f.weight"):
        flat = W[name].reshape(-1)  # a view: edits change W
        fd = []
        for i in range(4):
            keep = flat[i]
            flat[i] = keep + eps
            up = mean_ce(forward(W, ids, cfg), tg)
            flat[i] = keep - eps
            down = mean_ce(forward(W, ids, cfg), tg)
            flat[i] = keep
            fd.append((up - down) / (2 * eps))
        report(f"grad {name}[:4] (finite diff)", np.abs(np.array(fd) - ref["grad." + name].reshape(-1)[:4]).max(), 1e-8)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
