#!/usr/bin/env python3
"""PEFT on converted (mixed-plan) models, both ways (tests/scripts/test_peft_mixed.sh).

make OUT: OUT/qwen2_src (a transformers-made Qwen2, 6 heads over 2 KV heads, with a mixed plan:
  softmax, linear, sink_window, static and window heads and random head values) and OUT/gpt2_src
  (the committed GPT-2 fixture with a mixed plan) for `headwise export`; a token shard OUT/tokens.bin.
peft OUT: on the exported models (OUT/qwen2, OUT/gpt2, AutoModelForCausalLM with trust_remote_code),
  get_peft_model adapters trained a few SGD steps and saved with save_pretrained:
    OUT/a_qv      r 16, alpha 32, q_proj and v_proj;
    OUT/a_pattern r 8, alpha 16, q/k/v/o_proj, rank_pattern (v_proj 4, layer 1's q_proj 12),
                  alpha_pattern (o_proj 40), use_rslora;
    OUT/a_gpt2    GPT-2's fused c_attn, r 4, alpha 8 (fan_in_fan_out);
    OUT/a_dora    DoRA (use_dora), OUT/a_mlp q_proj and the MLP's gate_proj: headwise refuses both.
  Writes OUT/peft.json: each adapter's loss on the shard's first batch (2 x 24) and its logits.
check OUT NAME=LOSS...: what headwise wrote, in PyTorch: OUT/<NAME> (a checkpoint with headwise's
  adapters) through AutoModelForCausalLM (the adapters applied at load) and through
  PeftModel.from_pretrained on the base loaded with headwise_load_adapters=False, and folded into
  the weights by the model's own code (what it does where PEFT is missing); each loss against
  headwise eval's LOSS. merged:NAME=ADAPTER: the logits of OUT/<NAME> (headwise merge of
  a PEFT adapter) against PEFT's own for ADAPTER. Exits 1 on a mismatch.
"""
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_remote_code import first_batch, tokens_file, write_src  # noqa: E402

B, T = 2, 24
QWEN_PLAN = [["softmax", "linear", "sink_window:2:4", "static", "window:5", "softmax"],
             ["linear", "softmax", "static", "softmax", "sink_window:1:3", "linear"]]
GPT2_PLAN = [["linear", "softmax", "static", "window:3"], ["softmax", "sink_window:1:3", "linear", "softmax"]]


def make(out):
    from safetensors.torch import load_file
    from transformers import Qwen2Config, Qwen2ForCausalLM
    os.makedirs(out, exist_ok=True)
    tokens_file(out)
    g = torch.Generator().manual_seed(21)
    torch.manual_seed(21)
    m = Qwen2ForCausalLM(Qwen2Config(vocab_size=64, hidden_size=48, num_hidden_layers=2, num_attention_heads=6,
                                     num_key_value_heads=2, intermediate_size=80, max_position_embeddings=64,
                                     bos_token_id=None, eos_token_id=None))
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0, 0.2) if p.dim() > 1 else p.copy_(1 + 0.1 * torch.randn_like(p))
    write_src(os.path.join(out, "qwen2_src"), m.config.to_dict(), m.state_dict(), QWEN_PLAN, g, 64, 8)
    fix = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "hf_tiny_gpt2")
    cfg = json.load(open(os.path.join(fix, "config.json")))
    write_src(os.path.join(out, "gpt2_src"), cfg, load_file(os.path.join(fix, "model.safetensors")), GPT2_PLAN, g,
              32, 8)


def load(d, **kw):
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(d, trust_remote_code=True, dtype=torch.float32, **kw)


def loss_logits(model, x, y):
    with torch.no_grad():
        logits = model(x).logits.float()
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item(), logits


def peft(out):
    from peft import LoraConfig, get_peft_model
    x, y = first_batch(os.path.join(out, "tokens.bin"), B, T)
    specs = {
        "a_qv": ("qwen2", dict(r=16, lora_alpha=32, target_modules=["q_proj", "v_proj"])),
        "a_pattern": ("qwen2", dict(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                                    rank_pattern={"v_proj": 4, "model.layers.1.self_attn.q_proj": 12},
                                    alpha_pattern={"o_proj": 40}, use_rslora=True)),
        "a_gpt2": ("gpt2", dict(r=4, lora_alpha=8, target_modules=["c_attn"], fan_in_fan_out=True)),
        "a_dora": ("qwen2", dict(r=4, lora_alpha=8, target_modules=["q_proj"], use_dora=True)),
        "a_mlp": ("qwen2", dict(r=4, lora_alpha=8, target_modules=["q_proj", "gate_proj"])),
    }
    res = {}
    for name, (base, kw) in specs.items():
        torch.manual_seed(3)
        model = get_peft_model(load(os.path.join(out, base)), LoraConfig(lora_dropout=0.0, **kw))
        model.train()
        # (GPT-2's fixture has small weights: a larger step makes its adapter matter as much)
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=3.0 if base == "gpt2" else 0.3)
        for _ in range(3):
            logits = model(x).logits
            F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).backward()
            opt.step()
            opt.zero_grad()
        model.eval()
        model.save_pretrained(os.path.join(out, name))
        loss, logits = loss_logits(model, x, y)
        base_loss, _ = loss_logits(load(os.path.join(out, base)), x, y)
        torch.save(logits, os.path.join(out, name, "peft_logits.pt"))
        res[name] = {"loss": loss, "base_loss": base_loss}
    json.dump(res, open(os.path.join(out, "peft.json"), "w"))
    print(json.dumps(res))


def check(out, pairs):
    from peft import PeftModel
    x, y = first_batch(os.path.join(out, "tokens.bin"), B, T)
    ok = True
    for pair in pairs:
        if pair.startswith("merged:"):  # headwise merge's checkpoint of a PEFT adapter
            name, adapter = pair[len("merged:"):].split("=")
            _, logits = loss_logits(load(os.path.join(out, name)), x, y)
            ref = torch.load(os.path.join(out, adapter, "peft_logits.pt"))
            rel = ((logits - ref).abs().max() / ref.abs().max()).item()
            print(json.dumps({"merged": name, "peft_adapter": adapter, "logits_rel_err": rel}))
            ok = ok and rel < 1e-5
            continue
        name, hw = pair.split("=")
        d = os.path.join(out, name)
        folded, _ = loss_logits(load(d), x, y)
        base = load(d, headwise_load_adapters=False)
        plain, _ = loss_logits(base, x, y)
        attached, _ = loss_logits(PeftModel.from_pretrained(base, d), x, y)
        # Where PEFT is missing the model folds the adapters into its weights itself: that path too.
        merged = load(d, headwise_load_adapters=False)
        sys.modules[type(merged).__module__].merge_adapter_files(merged, d)
        merged_loss, _ = loss_logits(merged, x, y)
        hw = float(hw)
        rec = {"checkpoint": name, "headwise_eval": hw, "applied_at_load": folded, "peft_from_pretrained": attached,
               "folded_without_peft": merged_loss, "base_without_adapters": plain}
        print(json.dumps(rec))
        ok = ok and all(abs(v - hw) < 1e-5 * abs(hw) for v in (folded, attached, merged_loss)) and abs(plain - hw) > 1e-3
    return ok


def main():
    torch.set_num_threads(1)
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2])
    elif cmd == "peft":
        peft(sys.argv[2])
    else:
        sys.exit(0 if check(sys.argv[2], sys.argv[3:]) else 1)


if __name__ == "__main__":
    main()
