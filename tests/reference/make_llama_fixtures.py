#!/usr/bin/env python3
"""Build the Llama-family parity fixtures in tests/fixtures/hf_tiny_{llama,qwen2,qwen3}/.

Run by scripts/gen_llama_fixtures.sh (it makes a venv with torch + transformers); the outputs are
committed so CI never needs torch. Each model is tiny, with weights drawn wider than the default
init (every norm weight and bias too), so a C++ model missing any term fails the comparison:

  llama: LlamaForCausalLM, GQA (4 heads, 2 KV), Llama 3 rope_scaling whose three bands (kept,
         interpolated, divided) all hold a frequency, attention and MLP biases, untied LM head,
         intermediate_size != 4 hidden_size.
  qwen2: Qwen2ForCausalLM, q/k/v biases (no o bias), one KV head, tied LM head.
  qwen3: Qwen3ForCausalLM, q/k RMSNorm, head_dim 16 != hidden/heads = 8, untied; written in
         bfloat16 and in shards (model.safetensors.index.json).

Outputs per model: what save_pretrained writes, expected.json (inputs, targets, losses, greedy
tokens) and reference.safetensors (fp32 logits, float64 gradient of every parameter by its HF
name). References come from the saved weights (bf16 ones widened), so a loader that widens them
the same way matches. The float64 reference keeps float64 where transformers computes in float32 whatever the
model's dtype: RoPE's cos/sin (the frequencies are checked against its own), RMSNorm and the
attention softmax.
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
import transformers
from transformers import (LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config,
                          Qwen3ForCausalLM)

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures")
B, T = 2, 12
PROMPT, NEW = 8, 32
VOCAB = 96
STD = 0.25  # init std of every weight
SOFTMAX = torch.nn.functional.softmax


def configs():
    common = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  max_position_embeddings=64, bos_token_id=None, eos_token_id=None, pad_token_id=None,
                  initializer_range=STD)
    llama = LlamaConfig(**common, intermediate_size=48, num_key_value_heads=2, rms_norm_eps=1e-5,
                        rope_theta=100.0, attention_bias=True, mlp_bias=True, tie_word_embeddings=False,
                        rope_scaling={"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0, "original_max_position_embeddings": 32})
    qwen2 = Qwen2Config(**common, intermediate_size=64, num_key_value_heads=1, rms_norm_eps=1e-6,
                        rope_theta=10000.0, tie_word_embeddings=True, use_sliding_window=False)
    qwen3 = Qwen3Config(**common, intermediate_size=64, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6,
                        rope_theta=10000.0, attention_bias=False, tie_word_embeddings=False,
                        use_sliding_window=False)
    return [("llama", LlamaForCausalLM, llama, False), ("qwen2", Qwen2ForCausalLM, qwen2, False),
            ("qwen3", Qwen3ForCausalLM, qwen3, True)]


def inv_freq64(config, head_dim):
    """RoPE frequencies in float64: transformers' default and llama3 formulas."""
    rp = getattr(config, "rope_parameters", None) or {}
    theta = rp.get("rope_theta", getattr(config, "rope_theta", 10000.0))
    f = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    if rp.get("rope_type", "default") != "llama3":
        return f
    factor, low, high = rp["factor"], rp["low_freq_factor"], rp["high_freq_factor"]
    old = rp["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = 2 * math.pi / f
    scaled = torch.where(wavelen > low_wavelen, f / factor, f)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


def rotary_in_float64(model):
    rot = model.model.rotary_emb
    f64 = inv_freq64(model.config, rot.inv_freq.numel() * 2)
    # The transcription above must be transformers' own formula (which runs in float32).
    assert torch.allclose(f64.float(), rot.inv_freq.float(), rtol=1e-6, atol=0), (f64, rot.inv_freq)

    def forward(x, position_ids):
        freqs = position_ids.to(torch.float64)[:, :, None] * f64[None, None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    rot.forward = forward


def float64_throughout(model):
    """transformers computes RMSNorm and the attention softmax in float32 whatever the model's dtype;
    the float64 reference keeps float64 there (same formulas)."""
    for mod in model.modules():
        if type(mod).__name__.endswith("RMSNorm"):
            def forward(x, mod=mod):
                var = x.pow(2).mean(-1, keepdim=True)
                return mod.weight * (x * torch.rsqrt(var + mod.variance_epsilon))
            mod.forward = forward
    softmax = torch.nn.functional.softmax

    def softmax64(x, dim=None, _stacklevel=3, dtype=None):
        return softmax(x, dim=dim, dtype=None if x.dtype == torch.float64 else dtype)

    torch.nn.functional.softmax = softmax64


def widen_init(model):
    g = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(STD * torch.randn(p.shape, generator=g))


def loss_of(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def build(name, cls, config, bf16_shards):
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = cls(config).eval()
    widen_init(model)
    out = os.path.join(FIXTURES, "hf_tiny_" + name)
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        os.remove(os.path.join(out, f))
    if bf16_shards:
        model = model.to(torch.bfloat16)
        model.save_pretrained(out, max_shard_size="20KB")
    else:
        model.save_pretrained(out)
    # The references come from the saved files as transformers reads them (bf16 widened to fp32).
    model = cls.from_pretrained(out, dtype=torch.float32, attn_implementation="eager").eval()

    g = torch.Generator().manual_seed(7)
    ids = torch.randint(0, VOCAB, (B, T), generator=g)
    targets = torch.randint(0, VOCAB, (B, T), generator=g)
    with torch.no_grad():
        logits32 = model(ids).logits
    loss32 = loss_of(logits32, targets).item()

    # Greedy tokens (prompt + NEW) and the smallest top-2 logit gap on the way.
    prompt = ids[:1, :PROMPT]
    gen = model.generate(prompt, max_new_tokens=NEW, do_sample=False, output_scores=True,
                         return_dict_in_generate=True, eos_token_id=None, pad_token_id=0)
    gaps = [float((s[0].topk(2).values[0] - s[0].topk(2).values[1])) for s in gen.scores]

    m64 = model.double()
    rotary_in_float64(m64)
    float64_throughout(m64)
    m64.zero_grad()
    logits64 = m64(ids).logits
    loss64 = loss_of(logits64, targets)
    loss64.backward()
    ref = {"logits_f32": logits32.contiguous()}
    for pname, p in m64.named_parameters():
        ref["grad." + pname] = p.grad.detach().clone().contiguous()
    save_file(ref, os.path.join(out, "reference.safetensors"))
    torch.nn.functional.softmax = SOFTMAX
    expected = {
        "description": f"{cls.__name__} parity fixture; made by tests/reference/make_llama_fixtures.py",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "stored": "bfloat16, sharded" if bf16_shards else "float32",
        "input_ids": ids.tolist(),
        "targets": targets.tolist(),
        "loss_f32": loss32,
        "loss_f64": loss64.item(),
        "greedy_prompt": prompt[0].tolist(),
        "greedy_tokens": gen.sequences[0].tolist(),
        "greedy_min_top2_gap": min(gaps),
    }
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    print(f"{name}: loss f32 {loss32:.8f} f64 {loss64.item():.12f}, greedy min gap {min(gaps):.4f}, "
          f"files {sorted(os.listdir(out))}")


def main():
    torch.set_num_threads(1)
    for name, cls, config, bf16 in configs():
        build(name, cls, config, bf16)


if __name__ == "__main__":
    sys.exit(main())
