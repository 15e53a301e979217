#!/usr/bin/env python3
"""LoRA adapter files between headwise and PEFT on a Qwen2 model (tests/scripts/test_peft_adapters.sh).

load BASE ADAPTERS SHARD B T: PeftModel.from_pretrained(transformers model BASE, ADAPTERS); prints
  its loss on the shard's first batch and the batch's logits to ADAPTERS/peft_logits.pt.
logits CKPT SHARD B T REF: a plain checkpoint's logits (transformers) against REF's: max |difference|.
train BASE OUT SHARD B T RANK: PEFT adapters (q/k/v/o_proj, lora_alpha 16) trained a few SGD steps
  on the shard, saved to OUT with save_pretrained; prints their loss.
rename DIR / reshape DIR: a copy of DIR's adapter file with one tensor renamed / one B cut to rank 1.
"""
import json
import os
import sys

import torch
import torch.nn.functional as F
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM

sys.path.insert(0, os.path.dirname(__file__))
from hf_roundtrip import first_batch  # noqa: E402


def base(path):
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)


def loss_and_logits(model, x, y):
    with torch.no_grad():
        logits = model(x).logits.float()
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item(), logits


def main():
    torch.set_num_threads(1)
    cmd = sys.argv[1]
    if cmd == "load":
        b, a, shard, B, T = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
        model = PeftModel.from_pretrained(base(b), a)
        loss, logits = loss_and_logits(model, *first_batch(shard, B, T))
        torch.save(logits, os.path.join(a, "peft_logits.pt"))
        print(json.dumps({"loss": loss}))
    elif cmd == "logits":
        ckpt, shard, B, T, ref = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
        _, logits = loss_and_logits(base(ckpt), *first_batch(shard, B, T))
        print(json.dumps({"max_abs_diff": (logits - torch.load(ref)).abs().max().item()}))
    elif cmd == "train":
        b, out, shard, B, T, r = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
        torch.manual_seed(1)
        model = get_peft_model(base(b), LoraConfig(r=r, lora_alpha=16, lora_dropout=0.0,
                                                    target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
        x, y = first_batch(shard, B, T)
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5)
        for _ in range(3):
            logits = model(x).logits
            F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).backward()
            opt.step()
            opt.zero_grad()
        model.save_pretrained(out)
        loss, _ = loss_and_logits(model, x, y)
        print(json.dumps({"loss": loss}))
    elif cmd in ("rename", "reshape"):
        path = os.path.join(sys.argv[2], "adapter_model.safetensors")
        t = load_file(path)
        name = sorted(k for k in t if "lora_B" in k)[0]
        if cmd == "rename":
            t[name.replace("self_attn", "self_attention")] = t.pop(name)
        else:
            t[name] = t[name][:, :1].contiguous()
        save_file(t, path, metadata={"format": "pt"})
        print(name)


if __name__ == "__main__":
    main()
