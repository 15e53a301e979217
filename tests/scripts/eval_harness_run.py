"""Run lm-evaluation-harness (`--model hf`, through lm_eval.simple_evaluate) on a headwise
checkpoint, on local tasks that reuse the harness's own task definitions for each format (its
installed YAML files, by `include`) with the data files given, and write what it computed as JSON:
every example's log-likelihoods and greedy flags, acc / acc_norm and the time per task (requests
built and scored; the model is loaded once before), and the perplexity metrics of the texts.

Usage: eval_harness_run.py CKPT OUT.json THREADS TEXT_JSONL NAME:FORMAT=FILE.jsonl...
(tests/reference/make_eval_golden.py calls evaluate() for the committed golden numbers.)
"""
import json
import os
import sys
import tempfile
import time

import lm_eval
import torch
from lm_eval.models.huggingface import HFLM
from lm_eval.tasks import TaskManager

# Where each format's definition lives in the installed harness (lm_eval/tasks/...).
HARNESS_YAML = {
    "hellaswag": "hellaswag/hellaswag.yaml",
    "piqa": "piqa/piqa.yaml",
    "arc": "arc/arc_easy.yaml",
    "boolq": "super_glue/boolq/default.yaml",
    "sst2": "glue/sst2/default.yaml",
    "winogrande": "winogrande/default.yaml",
    "mmlu": "mmlu/default/mmlu_anatomy.yaml",
}
BOTH = "metric_list:\n  - metric: acc\n  - metric: acc_norm\n"


def data_files(path):
    # Every split name a definition may ask for points at the one file.
    return "dataset_path: json\ndataset_name: null\ndataset_kwargs:\n  data_files:\n" + "".join(
        f"    {s}: {json.dumps(path)}\n" for s in ("train", "validation", "test", "dev"))


def evaluate(ckpt, threads, text_jsonl, task_args):
    """What the harness computes on CKPT: the tasks NAME:FORMAT=FILE and the texts of TEXT_JSONL."""
    tasks = [(a.split(":", 1)[0],) + tuple(a.split(":", 1)[1].split("=", 1)) for a in task_args]
    torch.set_num_threads(threads)
    root = os.path.join(os.path.dirname(lm_eval.__file__), "tasks")
    tdir = tempfile.mkdtemp()
    names = []
    for tname, fmt, path in tasks:
        name = "hw_" + tname
        names.append(name)
        with open(os.path.join(tdir, name + ".yaml"), "w") as f:
            f.write(f"task: {name}\n")
            if fmt == "generic":  # the generic form as a harness task: prompt as given, " " + choice
                f.write("output_type: multiple_choice\ndoc_to_text: \"{{context}}\"\n"
                        "doc_to_choice: choices\ndoc_to_target: label\ntest_split: test\n")
            else:
                f.write(f"include: {json.dumps(os.path.join(root, HARNESS_YAML[fmt]))}\ntag: []\n")
            # acc and acc_norm for every task (the definitions of boolq, sst2, winogrande and mmlu
            # report acc only; process_results computes both the same way).
            f.write(data_files(os.path.abspath(path)) + BOTH)
    with open(os.path.join(tdir, "hw_text.yaml"), "w") as f:
        f.write("task: hw_text\noutput_type: loglikelihood_rolling\ntest_split: test\ndoc_to_text: \"\"\n"
                "doc_to_target: page\n" + data_files(os.path.abspath(text_jsonl)) +
                "metric_list:\n  - metric: word_perplexity\n  - metric: byte_perplexity\n"
                "  - metric: bits_per_byte\n")
    tm = TaskManager(include_path=tdir, include_defaults=True)
    # One model object for every run (what `--model hf --model_args pretrained=CKPT,dtype=float32`
    # builds), so each task's time is its own: building its requests and scoring them.
    lm = HFLM(pretrained=ckpt, dtype="float32", batch_size=8, device="cpu", trust_remote_code=True)
    out = {"tasks": [], "text": {}}
    for (tname, fmt, path), name in zip(tasks, names):
        t0 = time.time()
        res = lm_eval.simple_evaluate(model=lm, tasks=[name], num_fewshot=0, log_samples=True, task_manager=tm)
        seconds = time.time() - t0
        r = res["results"][name]
        samples = sorted(res["samples"][name], key=lambda s: s["doc_id"])
        out["tasks"].append({
            "name": tname,
            "format": fmt,
            "file": path,
            "seconds": seconds,
            "acc": r["acc,none"],
            "acc_norm": r["acc_norm,none"],
            "acc_stderr": r.get("acc_stderr,none"),
            "acc_norm_stderr": r.get("acc_norm_stderr,none"),
            "examples": len(samples),
            "lls": [[float(x[0][0]) for x in s["resps"]] for s in samples],
            "greedy": [[bool(x[0][1]) for x in s["resps"]] for s in samples],
        })
    text = lm_eval.simple_evaluate(model=lm, tasks=["hw_text"], log_samples=False, task_manager=tm)
    t = text["results"]["hw_text"]
    out["text"] = {k: t[k + ",none"] for k in ("word_perplexity", "byte_perplexity", "bits_per_byte")}
    return out


def main():
    ckpt, out_path, threads, text_jsonl = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    out = evaluate(ckpt, threads, text_jsonl, sys.argv[5:])
    with open(out_path, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
