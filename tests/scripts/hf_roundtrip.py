#!/usr/bin/env python3
"""Round trip between transformers and headwise (tests/scripts/test_hf_roundtrip.sh).

make DIR: random LlamaForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM (float32, float16 and
  bfloat16 shards) saved in DIR/<family>, a 16-bit token shard DIR/tokens.bin (llm.c header), and
  transformers' loss on its first batch (B x T, eval's batch) in DIR/<family>/hf_loss.json.
loss CKPT SHARD B T: AutoModelForCausalLM.from_pretrained(CKPT) and its loss on the first batch.
"""
import json
import os
import struct
import sys

import torch
import torch.nn.functional as F
from transformers import (AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM)

VOCAB = 160
B, T = 2, 24


def first_batch(shard, b, t):
    data = open(shard, "rb").read()
    header = struct.unpack("<256i", data[:1024])
    assert header[0] == 20240520 and header[1] == 1, header[:3]
    toks = torch.tensor(struct.unpack(f"<{b * t + 1}H", data[1024:1024 + 2 * (b * t + 1)]), dtype=torch.long)
    return toks[:-1].view(b, t), toks[1:].view(b, t)


def loss_of(model, x, y):
    with torch.no_grad():
        logits = model(x).logits.float()
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item()


def make(out):
    common = dict(vocab_size=VOCAB, hidden_size=48, num_hidden_layers=2, num_attention_heads=6,
                  max_position_embeddings=64, bos_token_id=None, eos_token_id=None, initializer_range=0.2)
    models = {
        "llama": (LlamaForCausalLM(LlamaConfig(**common, intermediate_size=80, num_key_value_heads=3,
                                               rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                                             "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                             "original_max_position_embeddings": 16},
                                               tie_word_embeddings=False)), torch.float32, None),
        "qwen2": (Qwen2ForCausalLM(Qwen2Config(**common, intermediate_size=96, num_key_value_heads=2,
                                               tie_word_embeddings=True)), torch.float16, None),
        "qwen3": (Qwen3ForCausalLM(Qwen3Config(**common, intermediate_size=96, num_key_value_heads=2,
                                               head_dim=12, tie_word_embeddings=False)), torch.bfloat16, "30KB"),
    }
    g = torch.Generator().manual_seed(3)
    toks = torch.randint(0, VOCAB, (4000,), generator=g)
    with open(os.path.join(out, "tokens.bin"), "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253)))
        f.write(struct.pack(f"<{len(toks)}H", *toks.tolist()))
    x, y = first_batch(os.path.join(out, "tokens.bin"), B, T)
    for name, (model, dtype, shard) in models.items():
        torch.manual_seed(0)
        with torch.no_grad():
            for p in model.parameters():
                p.normal_(0, 0.2) if p.dim() > 1 else p.copy_(1 + 0.1 * torch.randn_like(p))
        d = os.path.join(out, name)
        model.to(dtype).save_pretrained(d, **({"max_shard_size": shard} if shard else {}))
        back = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32)
        json.dump({"loss": loss_of(back, x, y)}, open(os.path.join(d, "hf_loss.json"), "w"))


def main():
    torch.set_num_threads(1)
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        ckpt, shard, b, t = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
        model = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32)
        print(json.dumps({"loss": loss_of(model, *first_batch(shard, b, t)), "class": type(model).__name__}))


if __name__ == "__main__":
    main()
