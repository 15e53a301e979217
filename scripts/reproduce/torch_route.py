#!/usr/bin/env python3
"""The GPU route of the papers' full-scale runs (docs/reproducing.md, `--backend torch` of
scripts/reproduce/oal.sh and aoh.sh): headwise calibrates and converts a pretrained model on the
CPU, then transformers + PEFT + lm-evaluation-harness do the rest on whatever device PyTorch has
(a GPU; the CPU in the tests), through the PyTorch model mixed-plan checkpoints carry. Each
subcommand writes what the headwise command it stands for writes, so the reports read either.

finetune --checkpoint DIR --config RUN.json --out RUN [--set train.K=V|data.K=V]... [--lora R,ALPHA,DROPOUT]
    `headwise train --init-from DIR` with LoRA on q/k/v/o and a frozen base, the head-kind
    parameters (linear L, dijiang log_w, taylorshift tau) trained as headwise trains them: the
    adapters of DIR's headwise_lora (what `convert --method oal` adds), or --lora's. The run
    config's train and data keys (AdamW, warm-up + cosine, clipping, accumulation, validation
    every eval_every updates on the first eval_batches blocks of data.val, the best kept). Writes
    RUN/metrics.jsonl, RUN/summary.json and RUN/checkpoints/best: the model with the adapters
    merged, which headwise and transformers both open.
ppl --checkpoint DIR --data GLOB --seq-len T
    `headwise eval --micro-batch 1` over every whole T-token block of the shards: one JSON line
    (loss, ppl, tokens).
tasks --checkpoint DIR --task FILE... --json OUT
    `headwise eval-tasks --json OUT`: lm-evaluation-harness (`--model hf`) on eval-tasks JSONL
    files (each format through the harness's own task definition), acc and acc_norm per file.
bench --checkpoint BASE --plan-from DIR --context N [--runs PW PR DW DR] [--dtype bf16|fp32]
    `headwise bench-infer --plan-from DIR`: prefill of N tokens and decode steps at N (PW + PR
    prefills, DW + DR decode steps) with DIR's plan on BASE's weights and with all-softmax, and the
    KV cache's bytes at N: one JSON line with bench-infer's keys.
"""
import argparse
import glob
import json
import math
import os
import re
import shutil
import struct
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

SIDE_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json")


def device():
    return "cuda" if torch.cuda.is_available() else "cpu"


def read_config(path):
    """A headwise run config: JSON with // comments."""
    text = "\n".join(line for line in open(path) if not line.lstrip().startswith("//"))
    return json.loads(text)


def load(d, dtype=torch.float32, **kw):
    """A checkpoint folder in PyTorch: a mixed plan through its own model files, the family's
    own type through transformers' class."""
    from transformers import AutoModelForCausalLM
    cfg = json.load(open(os.path.join(d, "config.json")))
    if cfg.get("model_type") != "headwise":
        kw.pop("headwise_load_adapters", None)
    return AutoModelForCausalLM.from_pretrained(d, trust_remote_code=True, dtype=dtype, **kw)


# --- token shards (llm.c's format, as scripts/prepare and headwise read them) -----------------------
def read_shard(path):
    with open(path, "rb") as f:
        header = struct.unpack("<256i", f.read(1024))
        if header[0] != 20240520 or header[1] not in (1, 2):
            sys.exit(f"error: {path}: not a token shard (magic {header[0]}, version {header[1]})")
        dt = np.uint16 if header[1] == 1 else np.uint32
        return np.frombuffer(f.read(header[2] * np.dtype(dt).itemsize), dtype=dt).astype(np.int64)


def shard_windows(pattern, T):
    """Every window of T + 1 tokens starting every T tokens inside a shard, in file order (headwise's
    TokenLoader with micro-batch 1)."""
    files = sorted(glob.glob(pattern))
    if not files:
        sys.exit(f"error: no shard matches {pattern}")
    out = []
    for f in files:
        toks = read_shard(f)
        for k in range((len(toks) - 1) // T):
            out.append(toks[k * T:k * T + T + 1])
    return out


# --- finetune --------------------------------------------------------------------------------------
def lr_at(step, t):
    if step < t["warmup_steps"]:
        return t["lr"] * (step + 1) / t["warmup_steps"]
    ratio = min(1.0, (step - t["warmup_steps"]) / max(1, t["steps"] - t["warmup_steps"]))
    return t["min_lr"] + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (t["lr"] - t["min_lr"])


def apply_sets(cfg, sets):
    for s in sets:
        key, _, value = s.partition("=")
        section, _, name = key.partition(".")
        if section not in ("train", "data") or not name:
            sys.exit(f"error: --set {s}: only train.* and data.* keys")
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            pass
        cfg.setdefault(section, {})[name] = value


def mean_loss(model, windows, dev):
    model.eval()
    total, n = 0.0, 0
    with torch.no_grad():
        for w in windows:
            x = torch.as_tensor(w[None, :-1], device=dev)
            y = torch.as_tensor(w[None, 1:], device=dev)
            logits = model(x, use_cache=False).logits.float()
            total += F.cross_entropy(logits[0], y[0], reduction="sum").item()
            n += y.numel()
    return total / max(n, 1), n


def finetune(a):
    from peft import LoraConfig, get_peft_model
    cfg = read_config(a.config)
    apply_sets(cfg, a.set or [])
    t = {"micro_batch": 8, "seq_len": 1024, "total_batch_tokens": 0, "steps": 1000, "lr": 6e-4, "min_lr": 6e-5,
         "warmup_steps": 0, "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.95, "adam_eps": 1e-8, "grad_clip": 1.0,
         "seed": 1337, "eval_every": 0, "eval_batches": 8}
    t.update(cfg.get("train", {}))
    data = cfg.get("data", {})
    dev = device()
    torch.manual_seed(int(t["seed"]))
    hcfg = json.load(open(os.path.join(a.checkpoint, "config.json")))
    lora = hcfg.get("headwise_lora")
    if a.lora:
        r, alpha, dropout = a.lora.split(",")
        lora = {"rank": int(r), "alpha": float(alpha), "dropout": float(dropout), "targets": ["q", "k", "v", "o"],
                "layers": []}
    if not lora:
        sys.exit(f"error: {a.checkpoint} has no headwise_lora and no --lora was given: nothing to fine-tune")
    model = load(a.checkpoint, headwise_load_adapters=False).to(dev)
    fam = hcfg.get("headwise_family", hcfg.get("model_type"))
    names = {"q": "c_attn", "k": "c_attn", "v": "c_attn", "o": "attn.c_proj"} if fam == "gpt2" else \
        {x: f"{x}_proj" for x in "qkvo"}
    targets = sorted({names[x] for x in lora["targets"]})
    pcfg = LoraConfig(r=lora["rank"], lora_alpha=lora["alpha"], lora_dropout=lora["dropout"], target_modules=targets,
                      layers_to_transform=lora.get("layers") or None, fan_in_fan_out=fam == "gpt2")
    model = get_peft_model(model, pcfg)
    for n, p in model.named_parameters():  # headwise's freeze_base: adapters and head-kind parameters train
        if re.search(r"\.attn\.(linear|dijiang|taylorshift)\.", n):
            p.requires_grad_(True)
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": t["weight_decay"]},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=t["lr"], betas=(t["beta1"], t["beta2"]), eps=t["adam_eps"])
    T, mb = int(t["seq_len"]), int(t["micro_batch"])
    accum = max(1, int(t["total_batch_tokens"] or mb * T) // (mb * T))
    train = shard_windows(data["train"], T)
    val = shard_windows(data["val"], T)[:int(t["eval_batches"])] if data.get("val") else []
    order = torch.randperm(len(train), generator=torch.Generator().manual_seed(int(t["seed"])))
    if not data.get("shuffle", True):
        order = torch.arange(len(train))
    os.makedirs(a.out, exist_ok=True)
    metrics = open(os.path.join(a.out, "metrics.jsonl"), "w")
    best, best_state, pos = (math.inf, -1), None, 0
    for step in range(int(t["steps"])):
        model.train()
        t0 = time.time()
        for g in opt.param_groups:
            g["lr"] = lr_at(step, t)
        total = 0.0
        for _ in range(accum):
            idx = [int(order[(pos + i) % len(train)]) for i in range(mb)]
            pos += mb
            batch = torch.as_tensor(np.stack([train[i] for i in idx]), device=dev)
            logits = model(batch[:, :-1], use_cache=False).logits.float()
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1)) / accum
            loss.backward()
            total += loss.item()
        norm = torch.nn.utils.clip_grad_norm_(params, t["grad_clip"] if t["grad_clip"] > 0 else float("inf"))
        opt.step()
        opt.zero_grad(set_to_none=True)
        metrics.write(json.dumps({"step": step, "loss": total, "lr": lr_at(step, t), "grad_norm": float(norm),
                                  "ms": 1e3 * (time.time() - t0)}) + "\n")
        last = step + 1 == int(t["steps"])
        if val and (last or (t["eval_every"] and (step + 1) % int(t["eval_every"]) == 0)):
            vl, _ = mean_loss(model, val, dev)
            metrics.write(json.dumps({"step": step + 1, "val_loss": vl, "val_ppl": math.exp(vl)}) + "\n")
            if vl < best[0]:
                best = (vl, step + 1)
                best_state = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
        metrics.flush()
    if best_state is not None:  # the best validation's weights
        with torch.no_grad():
            for n, p in model.named_parameters():
                if n in best_state:
                    p.copy_(best_state[n])
    merged = model.merge_and_unload()
    out = os.path.join(a.out, "checkpoints", "best")
    merged.save_pretrained(out)
    for f in SIDE_FILES:  # the tokenizer: the checkpoint's, else the training shards' (as headwise train)
        for src in (a.checkpoint, os.path.dirname(data["train"])):
            if os.path.exists(os.path.join(src, f)):
                shutil.copy(os.path.join(src, f), out)
                break
    summary = {"best": {"step": best[1] if best[1] >= 0 else int(t["steps"]), "val_loss": best[0] if val else None},
               "steps": int(t["steps"]), "device": dev, "backend": "torch"}
    json.dump(summary, open(os.path.join(a.out, "summary.json"), "w"), indent=1)
    print(json.dumps(summary))


# --- ppl ---------------------------------------------------------------------------------------------
def ppl(a):
    dev = device()
    model = load(a.checkpoint).to(dev)
    loss, n = mean_loss(model, shard_windows(a.data, a.seq_len), dev)
    print(json.dumps({"loss": loss, "ppl": math.exp(loss), "tokens": n, "checkpoint": a.checkpoint, "device": dev,
                      "backend": "torch"}))


# --- tasks -------------------------------------------------------------------------------------------
# eval-tasks' formats by their keys (src/eval/task_file.cpp detect_format) and the harness's
# definition of each (paths under lm_eval/tasks/).
def task_format(path):
    with open(path) as f:
        d = json.loads(next(line for line in f if line.strip()))
    has = lambda *k: all(x in d for x in k)
    for fmt, keys in (("generic", ("context", "choices", "label")), ("hellaswag", ("ctx_a", "ctx_b", "endings")),
                      ("piqa", ("goal", "sol1", "sol2")), ("arc", ("question", "choices", "answerKey")),
                      ("boolq", ("passage", "question")), ("winogrande", ("sentence", "option1", "option2")),
                      ("sst2", ("sentence", "label")), ("mmlu", ("question", "choices", "answer"))):
        if has(*keys):
            return fmt
    sys.exit(f"error: {path}: unknown task format (keys: {', '.join(d)})")


HARNESS_YAML = {"hellaswag": "hellaswag/hellaswag.yaml", "piqa": "piqa/piqa.yaml", "arc": "arc/arc_easy.yaml",
                "boolq": "super_glue/boolq/default.yaml", "sst2": "glue/sst2/default.yaml",
                "winogrande": "winogrande/default.yaml", "mmlu": "mmlu/default/mmlu_anatomy.yaml"}


def tasks(a):
    import lm_eval
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager
    root = os.path.join(os.path.dirname(lm_eval.__file__), "tasks")
    tdir = tempfile.mkdtemp()
    names = []
    for i, path in enumerate(a.task):
        fmt = task_format(path)
        name = f"hw_task_{i}"
        names.append((name, path, fmt))
        with open(os.path.join(tdir, name + ".yaml"), "w") as f:
            f.write(f"task: {name}\n")
            if fmt == "generic":
                f.write("output_type: multiple_choice\ndoc_to_text: \"{{context}}\"\ndoc_to_choice: choices\n"
                        "doc_to_target: label\ntest_split: test\n")
            else:
                f.write(f"include: {json.dumps(os.path.join(root, HARNESS_YAML[fmt]))}\ntag: []\n")
            f.write("dataset_path: json\ndataset_name: null\ndataset_kwargs:\n  data_files:\n" +
                    "".join(f"    {s}: {json.dumps(os.path.abspath(path))}\n" for s in ("train", "validation", "test", "dev")) +
                    "metric_list:\n  - metric: acc\n  - metric: acc_norm\n")
    dev = device()
    lm = HFLM(pretrained=a.checkpoint, dtype="float32", batch_size=a.batch, device=dev, trust_remote_code=True)
    tm = TaskManager(include_path=tdir, include_defaults=True)
    out = {"tasks": [], "backend": "torch", "device": dev}
    for name, path, fmt in names:
        t0 = time.time()
        r = lm_eval.simple_evaluate(model=lm, tasks=[name], num_fewshot=0, task_manager=tm)["results"][name]
        n = sum(1 for line in open(path) if line.strip())
        seconds = time.time() - t0
        out["tasks"].append({"task": path, "format": fmt, "examples": n, "acc": r["acc,none"],
                             "acc_stderr": r.get("acc_stderr,none"), "acc_norm": r["acc_norm,none"],
                             "acc_norm_stderr": r.get("acc_norm_stderr,none"), "examples_per_s": n / seconds})
    json.dump(out, open(a.json, "w"), indent=1)
    print(json.dumps(out))


# --- bench ---------------------------------------------------------------------------------------------
def bench(a):
    dev = device()
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    plan_model = load(a.plan_from, dtype=dtype).to(dev).eval()
    mod = sys.modules[type(plan_model).__module__]
    soft_model = None
    if a.side != "plan":
        cfg = json.load(open(os.path.join(a.checkpoint, "config.json")))
        fam = cfg.pop("model_type")
        if fam == "headwise":
            fam = cfg.pop("headwise_family")
        cfg.pop("head_plan", None)
        # The same model code with every head softmax: the reference differs from the plan in nothing else.
        base_cfg = type(plan_model.config)(headwise_family=fam, **cfg)
        soft_model = mod.HeadwiseForCausalLM.from_pretrained(a.checkpoint, config=base_cfg, dtype=dtype).to(dev).eval()
        if a.side == "all-softmax":  # one side per process (alternated rounds): free the plan's copy
            del plan_model
            plan_model = None
    pw, pr, dw, dr = a.runs
    N = a.context
    g = torch.Generator().manual_seed(1)
    vocab = (plan_model or soft_model).config.vocab_size
    ids = torch.randint(0, vocab, (1, N), generator=g).to(dev)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)

    def side(model):
        with torch.no_grad():
            times = []
            for i in range(pw + pr):
                sync()
                t0 = time.perf_counter()
                model(ids, cache=mod.HeadwiseCache(model.config), use_cache=True)
                sync()
                if i >= pw:
                    times.append(1e3 * (time.perf_counter() - t0))
            cache = mod.HeadwiseCache(model.config)
            model(ids[:, :N - dw - dr], cache=cache, use_cache=True)
            steps = []
            for i in range(dw + dr):
                sync()
                t0 = time.perf_counter()
                model(ids[:, N - dw - dr + i:N - dw - dr + i + 1], cache=cache, use_cache=True)
                sync()
                if i >= dw:
                    steps.append(1e3 * (time.perf_counter() - t0))
            full = mod.HeadwiseCache(model.config)
            model(ids, cache=full, use_cache=True)
        return {"prefill_ms": sum(times) / max(len(times), 1), "decode_ms_per_token": sum(steps) / max(len(steps), 1),
                "decode_median_ms_per_token": float(np.median(steps)) if steps else 0.0, "kv_cache_bytes": full.nbytes(),
                "weight_bytes_per_token": sum(p.numel() * p.element_size() for p in model.parameters())}

    # --side plan | all-softmax: one side per process, as headwise bench-infer --side (the AoH report
    # alternates them in rounds of fresh processes and reads the rounds' interval).
    if a.side != "both":
        key, model = ("plan", plan_model) if a.side == "plan" else ("all_softmax", soft_model)
        print(json.dumps({"context": N, "backend": "torch", "device": dev, "dtype": a.dtype, "side": a.side,
                          key: side(model)}))
        return
    plan, ref = side(plan_model), side(soft_model)
    ratio = lambda x, y: x / y if y > 0 else 0.0
    print(json.dumps({"context": N, "backend": "torch", "device": dev, "dtype": a.dtype, "plan": plan,
                      "all_softmax": ref, "prefill_ratio": ratio(plan["prefill_ms"], ref["prefill_ms"]),
                      "decode_ratio": ratio(plan["decode_ms_per_token"], ref["decode_ms_per_token"]),
                      "decode_median_ratio": ratio(plan["decode_median_ms_per_token"], ref["decode_median_ms_per_token"]),
                      "kv_bytes_ratio": ratio(plan["kv_cache_bytes"], ref["kv_cache_bytes"])}))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("finetune")
    f.add_argument("--checkpoint", required=True)
    f.add_argument("--config", required=True)
    f.add_argument("--out", required=True)
    f.add_argument("--set", action="append")
    f.add_argument("--lora")
    q = sub.add_parser("ppl")
    q.add_argument("--checkpoint", required=True)
    q.add_argument("--data", required=True)
    q.add_argument("--seq-len", type=int, required=True)
    k = sub.add_parser("tasks")
    k.add_argument("--checkpoint", required=True)
    k.add_argument("--task", action="append", required=True)
    k.add_argument("--json", required=True)
    k.add_argument("--batch", type=int, default=8)
    b = sub.add_parser("bench")
    b.add_argument("--checkpoint", required=True)
    b.add_argument("--plan-from", required=True)
    b.add_argument("--context", type=int, required=True)
    b.add_argument("--runs", type=int, nargs=4, default=[3, 10, 50, 100])
    b.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    b.add_argument("--side", choices=("both", "plan", "all-softmax"), default="both")
    a = p.parse_args()
    {"finetune": finetune, "ppl": ppl, "tasks": tasks, "bench": bench}[a.cmd](a)


if __name__ == "__main__":
    main()
