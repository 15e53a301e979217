#!/usr/bin/env python3
"""headwise's PyTorch model (python/headwise_hf/, copied into checkpoints) against headwise
(tests/scripts/test_hf_remote_code.sh).

make OUT: headwise-typed checkpoint folders OUT/src/<family>_<plan> for headwise to export: the
  weights of a transformers-made model of each family (the committed tests/fixtures/hf_tiny_*,
  and 12-head models made here for the plan that mixes every kind in one layer, GQA included;
  GPT-2 with RoPE, GQA and no biases, which transformers has no class for, is made here from
  random tensors), config.json with model_type "headwise" and the plan, and every head-kind value
  drawn at random (static alpha/rho, linear L and groups with G up to 4, performer W, dijiang
  log_w, taylorshift tau); a token shard OUT/tokens.bin. Prints the folder names and their T.
parity OUT NAME...: AutoModelForCausalLM.from_pretrained(OUT/dst/NAME, trust_remote_code=True)
  with HF_HUB_OFFLINE=1: the logits of the shard's first batch and every parameter's gradient of
  its mean loss against `headwise eval --dump` (OUT/dst/NAME/hw_dump.safetensors). Prints one
  JSON line per folder; exits 1 unless logits agree to 1e-5 and gradients to 1e-4 (relative to
  the tensor's largest value).
rest OUT: the other checks, in one process: generation (model.generate, greedy, HeadwiseCache, from
  the shard's first 10 ids, 40 new) against headwise generate's tokens (OUT/hw_<name>.txt) and
  greedy decoding by full forwards without a cache, streaming KV heads caching sink + window only;
  the bf16 export (OUT/dst/llama_mixed_bf16) in bfloat16; window heads through FlexAttention;
  OUT/unknown with an unknown head kind in its plan: one ValueError naming it.
"""
import json
import os
import struct
import sys

import torch
from safetensors.torch import load_file, save_file

SRC = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(SRC, "..", "fixtures")
KINDS_ALONE = ["softmax", "window:5", "sink_window:2:5", "static", "linear", "pruned", "performer:16", "dijiang",
               "taylorshift"]
# Every kind in each layer of a 12-head, 3-KV-head model (4 query heads per KV head, kinds mixed
# inside each group); layer 1 shifts them.
MIXED = ["softmax", "window:5", "sink_window:2:5", "static", "linear", "pruned", "performer:16", "dijiang",
         "taylorshift", "linear", "static", "window:70"]
GEN_GPT2 = [["sink_window:2:4", "window:3", "linear", "static"], ["softmax", "pruned", "sink_window:1:5", "linear"]]
GEN_LLAMA = [["softmax", "window:5", "sink_window:2:4", "static", "linear", "pruned", "sink_window:2:4", "window:3",
              "linear", "static", "sink_window:1:6", "softmax"],
             ["static", "static", "pruned", "linear", "sink_window:2:4", "window:5", "sink_window:3:2", "pruned",
              "softmax", "window:3", "linear", "static"]]
B, T = 2, 150
VOCAB = 64


def tokens_file(out):
    g = torch.Generator().manual_seed(5)
    toks = torch.randint(0, VOCAB, (4000,), generator=g)
    with open(os.path.join(out, "tokens.bin"), "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253)))
        f.write(struct.pack(f"<{len(toks)}H", *toks.tolist()))


def first_batch(shard, b, t):
    data = open(shard, "rb").read()
    toks = torch.tensor(struct.unpack(f"<{b * t + 1}H", data[1024:1024 + 2 * (b * t + 1)]), dtype=torch.long)
    return toks[:-1].view(b, t), toks[1:].view(b, t)


def all_tensors(d):
    out = {}
    for f in sorted(os.listdir(d)):
        if f.startswith("model") and f.endswith(".safetensors"):
            out.update(load_file(os.path.join(d, f)))
    return out


def head_values(cfg, plan, g):
    """Random values for every head of the plan that has some, under headwise's names."""
    L = len(plan)
    H = len(plan[0])
    D = cfg["head_dim"]
    n = cfg["positions"]
    out = {}
    for l in range(L):
        for h in range(H):
            kind = plan[l][h].split(":")[0]
            p = f"h.{l}.attn.{kind}.{h}."
            if kind == "static":
                out[p + "alpha"] = torch.randn(n, generator=g)
                out[p + "rho"] = 2.0 * torch.randn(n, generator=g) - 0.05 * torch.arange(n)
            elif kind == "linear":
                G = int(torch.randint(1, min(4, D) + 1, (1,), generator=g))
                groups = torch.cat((torch.arange(1, G + 1), torch.randint(1, G + 1, (D - G,), generator=g)))
                groups = groups[torch.randperm(D, generator=g)]
                Lm = torch.tril(0.5 * torch.randn(G + 1, G + 1, generator=g))
                Lm += torch.diag(0.5 + torch.rand(G + 1, generator=g))
                Lm += torch.triu(torch.randn(G + 1, G + 1, generator=g), 1)  # above the diagonal: not read
                out[p + "L"], out[p + "groups"] = Lm, groups.to(torch.int32)
            elif kind == "performer":
                m = int(plan[l][h].split(":")[1]) if ":" in plan[l][h] else 250
                out[p + "W"] = torch.randn(m, D, generator=g)
            elif kind == "dijiang":
                out[p + "log_w"] = 0.5 * torch.randn(D, generator=g)
            elif kind == "taylorshift":
                out[p + "tau"] = 0.5 + torch.rand(1, generator=g)
    return out


def write_src(dst, config, tensors, plan, g, positions, head_dim):
    os.makedirs(dst, exist_ok=True)
    cfg = dict(config)
    if cfg["model_type"] != "headwise":
        cfg["headwise_family"] = cfg["model_type"]
    cfg["model_type"] = "headwise"
    cfg["architectures"] = ["HeadwiseForCausalLM"]
    cfg["head_plan"] = plan
    cfg["linear_eps"] = 1e-3
    tied = cfg.get("tie_word_embeddings", cfg.get("headwise_family", cfg["model_type"]) == "gpt2")
    t = {k: v.float().clone() for k, v in tensors.items() if not (tied and k == "lm_head.weight")}
    t.update(head_values({"head_dim": head_dim, "positions": positions}, plan, g))
    save_file(t, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
    json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=1)


def twelve_head(family):
    """A transformers-made 12-head, 3-KV-head model of the family (random weights)."""
    from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, Qwen2Config,
                              Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)
    common = dict(vocab_size=VOCAB, hidden_size=96, num_hidden_layers=2, num_attention_heads=12,
                  num_key_value_heads=3, max_position_embeddings=160, bos_token_id=None, eos_token_id=None)
    torch.manual_seed(11)
    if family == "gpt2":
        m = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_embd=96, n_layer=2, n_head=12, n_positions=160,
                                       bos_token_id=None, eos_token_id=None))
    elif family == "llama":
        m = LlamaForCausalLM(LlamaConfig(**common, intermediate_size=80, attention_bias=True, mlp_bias=True,
                                         rope_scaling={"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                                                       "high_freq_factor": 4.0,
                                                       "original_max_position_embeddings": 32}))
    elif family == "qwen2":
        m = Qwen2ForCausalLM(Qwen2Config(**common, intermediate_size=80, tie_word_embeddings=True))
    else:
        m = Qwen3ForCausalLM(Qwen3Config(**common, intermediate_size=80, head_dim=16))
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0, 0.2) if p.dim() > 1 else p.copy_(1 + 0.1 * torch.randn_like(p))
    cfg = m.config.to_dict()
    return cfg, {k: v for k, v in m.state_dict().items() if not k.endswith(".attn.bias")}


def gpt2_rope():
    """GPT-2 as headwise trains it with RoPE, 2 KV heads of 4 and no biases (no transformers class)."""
    g = torch.Generator().manual_seed(13)
    C, H, KV, L, n = 64, 4, 2, 2, 160
    hd = C // H
    cfg = {"model_type": "gpt2", "vocab_size": VOCAB, "n_positions": n, "n_ctx": n, "n_embd": C, "n_layer": L,
           "n_head": H, "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
           "tie_word_embeddings": True, "headwise_n_kv_head": KV, "headwise_pos": "rope",
           "headwise_rope_theta": 500.0, "headwise_bias": False, "bos_token_id": None, "eos_token_id": None}
    r = lambda *s: 0.2 * torch.randn(*s, generator=g)
    t = {"wte.weight": r(VOCAB, C), "ln_f.weight": 1 + r(C), "ln_f.bias": r(C)}
    for l in range(L):
        p = f"h.{l}."
        t.update({p + "ln_1.weight": 1 + r(C), p + "ln_1.bias": r(C), p + "ln_2.weight": 1 + r(C),
                  p + "ln_2.bias": r(C), p + "attn.c_attn.weight": r(C, (H + 2 * KV) * hd),
                  p + "attn.c_proj.weight": r(C, C), p + "mlp.c_fc.weight": r(C, 4 * C),
                  p + "mlp.c_proj.weight": r(4 * C, C)})
    return cfg, t


def make(out):
    os.makedirs(out, exist_ok=True)
    tokens_file(out)
    g = torch.Generator().manual_seed(7)
    made = []
    for fam in ("gpt2", "llama", "qwen2", "qwen3"):
        fix = os.path.join(FIXTURES, f"hf_tiny_{fam}")
        cfg = json.load(open(os.path.join(fix, "config.json")))
        tensors = all_tensors(fix)
        if fam == "gpt2":
            H, L, positions, hd, t = cfg["n_head"], cfg["n_layer"], cfg["n_positions"], cfg["n_embd"] // cfg["n_head"], 32
        else:
            H, L, positions, t = cfg["num_attention_heads"], cfg["num_hidden_layers"], 160, T
            hd = cfg.get("head_dim") or cfg["hidden_size"] // H
            cfg["max_position_embeddings"] = positions
        for kind in KINDS_ALONE:
            name = f"{fam}_{kind.split(':')[0]}"
            write_src(os.path.join(out, "src", name), cfg, tensors, [[kind] * H for _ in range(L)], g, positions, hd)
            made.append((name, t))
        cfg12, t12 = twelve_head(fam)
        hd12 = cfg12.get("head_dim") or 96 // 12
        plan = [MIXED, MIXED[5:] + MIXED[:5]]
        write_src(os.path.join(out, "src", f"{fam}_mixed"), cfg12, t12, plan, g, 160, hd12)
        made.append((f"{fam}_mixed", T))
    cfg, t = gpt2_rope()
    plan = [["linear", "window:9", "static", "performer:8"], ["sink_window:1:3", "dijiang", "taylorshift", "pruned"]]
    write_src(os.path.join(out, "src", "gpt2rope_mixed"), cfg, t, plan, g, 160, 16)
    made.append(("gpt2rope_mixed", T))
    # Generation (the kinds cached decoding runs): per KV group every position (softmax), V only
    # (static heads alone), the sink and a ring of the last W positions (window heads), and the
    # linear heads' state; small rings, so that 40 new tokens wrap them many times.
    write_src(os.path.join(out, "src", "gpt2rope_gen"), cfg, t, GEN_GPT2, g, 160, 16)
    made.append(("gpt2rope_gen", T))
    cfg12, t12 = twelve_head("llama")
    write_src(os.path.join(out, "src", "llama_gen"), cfg12, t12, GEN_LLAMA, g, 160, 8)
    made.append(("llama_gen", T))
    for name, t in made:
        print(name, t)


def load(d, **kw):
    """The folder's PyTorch model: through its own files (auto_map) for a mixed plan; an
    all-softmax plan is the family's type (transformers' class), which this test runs through
    the same Python model, from the repository's copy (python/headwise_hf)."""
    from transformers import AutoModelForCausalLM
    cfg = json.load(open(os.path.join(d, "config.json")))
    if cfg["model_type"] == "headwise":
        return AutoModelForCausalLM.from_pretrained(d, trust_remote_code=True, dtype=torch.float32, **kw)
    sys.path.insert(0, os.path.join(SRC, "..", "..", "python"))
    from headwise_hf import HeadwiseConfig, HeadwiseForCausalLM
    cfg["headwise_family"] = cfg.pop("model_type")
    return HeadwiseForCausalLM.from_pretrained(d, config=HeadwiseConfig(**cfg), dtype=torch.float32, **kw)


def grads_of(model, x, y):
    logits = model(x).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    loss.backward()
    g = {}
    for pname, p in model.named_parameters():
        key = "grad." + (pname[len("transformer."):] if pname.startswith("transformer.") else pname)
        g[key] = p.grad if p.grad is not None else torch.zeros_like(p)
    return logits.detach(), loss.item(), g


def compare(name, ref, logits, loss, grads):
    """Errors of one run against headwise's dump: logits relative to their largest, each gradient
    relative to its tensor's largest value and to the model's largest gradient."""
    want = ref["logits"]
    rec = {"logits": ((logits - want).abs().max() / want.abs().max()).item(),
           "loss": abs(loss - ref["loss"].item()) / abs(ref["loss"].item())}
    missing = sorted(set(grads) ^ {k for k in ref if k.startswith("grad.")})
    top = max(w.abs().max().item() for k, w in ref.items() if k.startswith("grad."))
    per_tensor, vs_model, worst = 0.0, 0.0, ""
    for key, g in grads.items():
        if key not in ref:
            continue
        w = ref[key]
        d = (g.to(w.dtype) - w).abs().max().item()
        e = d / w.abs().max().item() if w.abs().max().item() > 0 else d
        if e > per_tensor:
            per_tensor, worst = e, key[5:]
        vs_model = max(vs_model, d / top)
    rec.update({"grad_per_tensor": per_tensor, "worst_tensor": worst, "grad_vs_largest": vs_model,
                "tensors": len(grads), "unmatched": missing})
    return rec


def parity(out, names, t_of):
    """fp32: logits 1e-5, gradients 1e-4 of the largest gradient (headwise's fp32 model against
    this one in fp32); fp64: the same computation in double on both sides (headwise's Model<double>
    with the same values), logits 1e-12 and each gradient 1e-10 of its tensor's largest: the
    definitions agree exactly, whatever float32 rounding does to small, cancelling sums."""
    failed = []
    worst = {}
    for name in names:
        d = os.path.join(out, "dst", name)
        t = int(t_of[name])
        x, y = first_batch(os.path.join(out, "tokens.bin"), B, t)
        line = {"checkpoint": name}
        for prec, dtype in (("fp32", torch.float32), ("fp64", torch.float64)):
            model = load(d).to(dtype)
            model.eval()
            rec = compare(name, load_file(os.path.join(d, f"hw_dump_{prec}.safetensors")), *grads_of(model, x, y))
            line[prec] = rec
            if prec == "fp32":
                good = rec["logits"] < 1e-5 and rec["loss"] < 1e-5 and rec["grad_vs_largest"] < 1e-4
            else:
                good = rec["logits"] < 1e-12 and rec["loss"] < 1e-12 and rec["grad_per_tensor"] < 1e-10
            good = good and not rec["unmatched"]
            line[prec]["ok"] = good
            if not good:
                failed.append(f"{name} {prec} (logits {rec['logits']:.1e})")
            fam = name.split("_")[0]
            w = worst.setdefault(f"{fam} {prec}", {"logits": 0.0, "grad_vs_largest": 0.0, "grad_per_tensor": 0.0})
            for k in w:
                w[k] = max(w[k], rec[k])
        print(json.dumps(line))
    print(json.dumps({"worst": worst}))
    print(json.dumps({"failed": failed}))
    return not failed


def generate(out, name, prompt_len, new, hw_tokens):
    """Greedy tokens of model.generate (HeadwiseCache) against headwise generate's and against
    greedy decoding by a full forward per token (no cache); the streaming groups' cache holds
    their sink and last W positions only."""
    d = os.path.join(out, "dst", name)
    model = load(d)
    model.eval()
    prompt, _ = first_batch(os.path.join(out, "tokens.bin"), 1, prompt_len)
    with torch.no_grad():
        got = model.generate(prompt, max_new_tokens=new, do_sample=False, pad_token_id=0, eos_token_id=None,
                             return_dict_in_generate=True)
        cached = got.sequences[0, prompt_len:].tolist()
        seq = prompt
        for _ in range(new):  # no cache: the whole sequence each step
            nxt = model(seq, use_cache=False).logits[0, -1].argmax()
            seq = torch.cat((seq, nxt.view(1, 1)), 1)
        full = seq[0, prompt_len:].tolist()
    hw = [int(v) for v in open(hw_tokens).read().split()]
    cache = getattr(got, "cache", None) or getattr(got, "past_key_values", None)
    ring_ok, stream_rows = True, 0
    total = prompt_len + new
    for lc in cache.layers:
        for sig, (K, V, pos) in lc.kv.items():
            if sig[0] == "stream":
                stream_rows = max(stream_rows, pos.numel())
                ring_ok = ring_ok and pos.numel() == sig[1] + sig[2] and K.shape[2] == pos.numel()
            else:
                ring_ok = ring_ok and pos.numel() == total - 1  # the last token is generated, not fed back
    rec = {"checkpoint": name, "new_tokens": new, "generate_equals_headwise": cached == hw,
           "generate_equals_full_forward": cached == full, "stream_rows": stream_rows, "positions": total,
           "cache_bytes": cache.nbytes(), "ring_ok": ring_ok}
    print(json.dumps(rec))
    if cached != hw:
        print(json.dumps({"transformers": cached, "headwise": hw, "no_cache": full}))
    return cached == hw and cached == full and ring_ok


def unknown(d):
    """DIR after putting an unknown kind in its plan: loading raises one ValueError naming it."""
    cfg = json.load(open(os.path.join(d, "config.json")))
    cfg["head_plan"][0][1] = "sliding:4"
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    try:
        load(d)
    except ValueError as e:
        msg = str(e)
        print(json.dumps({"unknown_kind_error": f"{type(e).__name__}: {msg}"}))
        return msg.startswith("headwise: unknown head kind 'sliding:4'") and "\n" not in msg
    print(json.dumps({"unknown_kind_error": None}))
    return False


def bf16(out, name, t):
    """The bf16 export in bfloat16: weights bf16, head-kind values float32, logits near the fp32
    model's (bf16 rounding), and the fp32 run of the same bf16 weights equal to headwise's eval."""
    from transformers import AutoModelForCausalLM
    d = os.path.join(out, "dst", name + "_bf16")
    x, y = first_batch(os.path.join(out, "tokens.bin"), B, t)
    m16 = AutoModelForCausalLM.from_pretrained(d, trust_remote_code=True, dtype=torch.bfloat16)
    m32 = load(os.path.join(out, "dst", name))
    dtypes = {n: p.dtype for n, p in m16.named_parameters()}
    values32 = all(dt == torch.float32 for n, dt in dtypes.items() if ".attn." in n and n.split(".")[-1] in
                   ("L", "log_w", "tau"))
    weights16 = dtypes["model.layers.0.self_attn.q_proj.weight"] == torch.bfloat16
    with torch.no_grad():
        a, b = m16(x).logits.float(), m32(x).logits
    rel = ((a - b).abs().max() / b.abs().max()).item()
    rec = {"checkpoint": name + "_bf16", "weights_bf16": weights16, "head_values_fp32": values32,
           "logits_rel_err_vs_fp32": rel}
    print(json.dumps(rec))
    return weights16 and values32 and rel < 5e-2


def flex(out, name, t):
    """Window heads through FlexAttention (eager on the CPU) give the mask path's logits."""
    from transformers import AutoModelForCausalLM
    d = os.path.join(out, "dst", name)
    x, _ = first_batch(os.path.join(out, "tokens.bin"), B, t)
    with torch.no_grad():
        a = load(d).eval()(x).logits
        m = AutoModelForCausalLM.from_pretrained(d, trust_remote_code=True, dtype=torch.float32,
                                                 headwise_attention="flex").eval()
        b = m(x).logits
    rel = ((a - b).abs().max() / a.abs().max()).item()
    print(json.dumps({"checkpoint": name, "flex_vs_sdpa_logits": rel}))
    return rel < 1e-5


def main():
    torch.set_num_threads(1)
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2])
        return
    if cmd == "parity":
        out = sys.argv[2]
        t_of = dict(line.split() for line in open(os.path.join(out, "made.txt")))
        sys.exit(0 if parity(out, sys.argv[3:], t_of) else 1)
    if cmd == "rest":  # one process (torch's start-up is most of a small check's time)
        out = sys.argv[2]
        results = {f"generate {n}": generate(out, n, 10, 40, os.path.join(out, f"hw_{n}.txt"))
                   for n in ("gpt2rope_gen", "llama_gen")}
        results["bf16"] = bf16(out, "llama_mixed", T)
        results["flex"] = flex(out, "llama_mixed", T)
        results["unknown kind"] = unknown(os.path.join(out, "unknown"))
        print(json.dumps({"rest": results}))
        sys.exit(0 if all(results.values()) else 1)


if __name__ == "__main__":
    main()
