"""The Llama-style model of headwise's CPU training benchmark (configs/bench_cpu_small_llama.json),
in plain PyTorch eager: RMSNorm, rotary positions (rotate-half, as transformers' Llama), grouped
query attention through causal SDPA, SwiGLU MLP, no biases, tied embeddings, normal(0.02) init
with the residual projections scaled by 1/sqrt(2 n_layer) as headwise's init does.
bench_pytorch_cpu.py --family llama builds it from here.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def rope_tables(T, d, theta, device=None):
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32, device=device) / d))
    ang = torch.outer(torch.arange(T, dtype=torch.float32, device=device), inv)  # [T, d/2]
    ang = torch.cat([ang, ang], dim=-1)  # rotate-half layout
    return ang.cos(), ang.sin()


def rotate(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class Block(nn.Module):
    def __init__(self, n_embd, n_head, n_kv_head, inter, eps):
        super().__init__()
        self.n_head, self.n_kv_head, self.d = n_head, n_kv_head, n_embd // n_head
        self.eps = eps
        self.ln_1 = nn.Parameter(torch.ones(n_embd))
        self.ln_2 = nn.Parameter(torch.ones(n_embd))
        self.qkv = nn.Linear(n_embd, (n_head + 2 * n_kv_head) * self.d, bias=False)
        self.o_proj = nn.Linear(n_head * self.d, n_embd, bias=False)
        self.gate_up = nn.Linear(n_embd, 2 * inter, bias=False)
        self.down_proj = nn.Linear(inter, n_embd, bias=False)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        h = F.rms_norm(x, (C,), self.ln_1, self.eps)
        q, k, v = self.qkv(h).split([self.n_head * self.d, self.n_kv_head * self.d, self.n_kv_head * self.d], dim=2)
        q = rotate(q.view(B, T, self.n_head, self.d).transpose(1, 2), cos, sin)
        k = rotate(k.view(B, T, self.n_kv_head, self.d).transpose(1, 2), cos, sin)
        v = v.view(B, T, self.n_kv_head, self.d).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o_proj(y.transpose(1, 2).reshape(B, T, C))
        g, u = self.gate_up(F.rms_norm(x, (C,), self.ln_2, self.eps)).chunk(2, dim=-1)
        return x + self.down_proj(F.silu(g) * u)


class Llama(nn.Module):
    def __init__(self, vocab, block, n_layer, n_embd, n_head, n_kv_head, inter, theta=10000.0, eps=1e-5):
        super().__init__()
        self.vocab = vocab
        self.wte = nn.Embedding(vocab, n_embd)
        self.blocks = nn.ModuleList(Block(n_embd, n_head, n_kv_head, inter, eps) for _ in range(n_layer))
        self.ln_f = nn.Parameter(torch.ones(n_embd))
        self.eps = eps
        cos, sin = rope_tables(block, n_embd // n_head, theta)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx)
        cos, sin = self.cos[:T], self.sin[:T]
        for b in self.blocks:
            x = b(x, cos, sin)
        logits = F.rms_norm(x, (x.shape[-1],), self.ln_f, self.eps) @ self.wte.weight.T  # tied head
        return F.cross_entropy(logits.reshape(-1, self.vocab), targets.reshape(-1))
