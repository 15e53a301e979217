#!/usr/bin/env python3
"""lm-evaluation-harness's numbers on a tiny committed checkpoint, for tests/cli/test_eval_tasks_cli.cpp
to compare `headwise eval-tasks` and `eval --text` against without the network.

Writes, once by hand (the outputs are committed; run it with the venv of scripts/python_env.sh:
  bash scripts/python_env.sh build/pyvenv torch "lm_eval[hf]==0.4.13" "transformers==5.24.0"
  build/pyvenv/bin/hwpy tests/reference/make_eval_golden.py):
  tests/fixtures/eval_gpt2/{config.json,model.safetensors}: a GPT2LMHeadModel made by transformers
    (2 layers, 2 heads, width 16, 64 positions, the 3,328 ids of the GPT-2-style fixture tokenizer;
    every weight drawn from N(0, 0.3), bias and LayerNorm parameters too, so that a missing term
    shows), stored in bfloat16 (both tools widen it to float32 and compute in float32);
  tests/fixtures/eval/harness_golden.json: for the checkpoint with tests/fixtures/tokenizers/
    gpt2_style.json as its tokenizer.json, and again with that tokenizer's post-processor replaced
    by one that puts a BOS before each text (Llama 3 style; the JSON is in the file), the harness's
    (`--model hf`, eval_harness_run.py: its own task definitions per format, the data files
    swapped) per-example log-likelihoods and greedy flags, acc and acc_norm of every committed task
    file, and the word/byte perplexity and bits per byte of the two committed texts; the token
    perplexity is exp(-LL / tokens) with LL from bits per byte and the tokens the harness scores
    counted by the checkpoint's transformers tokenizer (a BOS template's token included).
"""
import importlib.metadata
import json
import math
import os
import shutil
import sys
import tempfile

import torch
import transformers
from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "scripts"))
import eval_harness_run  # noqa: E402

FIX = os.path.join(ROOT, "tests", "fixtures")
CKPT = os.path.join(FIX, "eval_gpt2")
GOLDEN = os.path.join(FIX, "eval", "harness_golden.json")
TOKENIZER = os.path.join(FIX, "tokenizers", "gpt2_style.json")
TASKS = [("generic", "generic"), ("hellaswag", "hellaswag"), ("piqa", "piqa"), ("arc", "arc_easy"),
         ("boolq", "boolq"), ("sst2", "sst2"), ("winogrande", "winogrande"), ("mmlu", "mmlu")]
TEXTS = ["text_a.txt", "text_b.txt"]


def bos_post_processor():
    seq = lambda i, t: {"Sequence": {"id": i, "type_id": t}}
    bos = lambda t: {"SpecialToken": {"id": "<|endoftext|>", "type_id": t}}
    return {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True},
        {"type": "TemplateProcessing", "single": [bos(0), seq("A", 0)],
         "pair": [bos(0), seq("A", 0), bos(1), seq("B", 1)],
         "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [0], "tokens": ["<|endoftext|>"]}}}]}


def make_checkpoint():
    config = GPT2Config(vocab_size=3328, n_positions=64, n_embd=16, n_layer=2, n_head=2,
                        layer_norm_epsilon=1e-5, activation_function="gelu_new", resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=True, bos_token_id=0,
                        eos_token_id=0)
    torch.manual_seed(57)
    model = GPT2LMHeadModel(config)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    os.makedirs(CKPT, exist_ok=True)
    for f in os.listdir(CKPT):
        os.remove(os.path.join(CKPT, f))
    model.to(torch.bfloat16).save_pretrained(CKPT)
    for extra in ("generation_config.json",):  # not read by either tool: keep the fixture small
        if os.path.exists(os.path.join(CKPT, extra)):
            os.remove(os.path.join(CKPT, extra))


def run_harness(ckpt, work, task_pairs):
    text_jsonl = os.path.join(work, "text.jsonl")
    with open(text_jsonl, "w") as f:
        for name in TEXTS:
            f.write(json.dumps({"page": open(os.path.join(FIX, "eval", name), encoding="utf-8").read()}) + "\n")
    out = eval_harness_run.evaluate(ckpt, 1, text_jsonl, [f"{n}:{n}={os.path.join(FIX, 'eval', f + '.jsonl')}"
                                                          for n, f in task_pairs])
    tok = AutoTokenizer.from_pretrained(ckpt)
    n_bytes = sum(len(open(os.path.join(FIX, "eval", n), "rb").read()) for n in TEXTS)
    # The tokens the harness scores: the text as the checkpoint's tokenizer encodes it, template
    # tokens included (loglikelihood_rolling scores a BOS the template adds, given the prefix token).
    n_tokens = sum(len(tok(open(os.path.join(FIX, "eval", n), encoding="utf-8").read())["input_ids"]) for n in TEXTS)
    ll = -out["text"]["bits_per_byte"] * n_bytes * math.log(2)
    tasks = [{"format": t["format"], "file": f"tests/fixtures/eval/{dict(task_pairs)[t['format']]}.jsonl",
              "acc": t["acc"], "acc_norm": t["acc_norm"], "lls": t["lls"], "greedy": t["greedy"]} for t in out["tasks"]]
    text = dict(out["text"], token_perplexity=math.exp(-ll / n_tokens), tokens=n_tokens, bytes=n_bytes)
    return {"tasks": tasks, "text": text}


def main():
    make_checkpoint()
    golden = {
        "description": "lm-evaluation-harness (--model hf) on tests/fixtures/eval_gpt2 with the GPT-2-style fixture "
                       "tokenizer; made by tests/reference/make_eval_golden.py",
        "versions": {"lm_eval": importlib.metadata.version("lm_eval"), "transformers": transformers.__version__,
                     "torch": torch.__version__},
        "texts": [f"tests/fixtures/eval/{n}" for n in TEXTS],
        "bos_post_processor": bos_post_processor(),
    }
    work = tempfile.mkdtemp()
    try:
        for variant in ("plain", "bos"):
            ckpt = os.path.join(work, variant)
            shutil.copytree(CKPT, ckpt)
            tok = json.load(open(TOKENIZER))
            if variant == "bos":
                tok["post_processor"] = bos_post_processor()
            json.dump(tok, open(os.path.join(ckpt, "tokenizer.json"), "w"))
            golden[variant] = run_harness(ckpt, work, TASKS)
    finally:
        shutil.rmtree(work)
    with open(GOLDEN, "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    for variant in ("plain", "bos"):
        g = golden[variant]
        print(variant, [(t["format"], t["acc"], t["acc_norm"]) for t in g["tasks"]], g["text"], file=sys.stderr)


if __name__ == "__main__":
    main()
