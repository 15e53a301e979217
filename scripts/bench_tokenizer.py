#!/usr/bin/env python3
"""Tokenizer throughput: `headwise prepare --tokenizer` against the `tokenizers` package's batch
encode, at the same thread count, on the embedded corpus (the KJV text) or a given file.

  python3 scripts/bench_tokenizer.py [--headwise build/headwise] [--threads 1 2] [--text FILE]
                                     [--tokenizer tests/fixtures/tokenizers/gpt2_style.json]

headwise: the wall time of the whole `prepare` (reading, encoding, writing the shards).
tokenizers: encode_batch and encode_batch_fast (no offsets) over the corpus's lines (its documents), add_special_tokens=False,
RAYON_NUM_THREADS=threads, best of 3 in a fresh process (its merge cache warms within a run, as
headwise's does). Prints MB/s for both and the ratio. Installs `tokenizers` with pip if missing.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PY_BENCH = r"""
import sys, time
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
lines = open(sys.argv[2], encoding="utf-8").read().splitlines(keepends=True)
res = []
for name in ("encode_batch", "encode_batch_fast"):  # _fast: no offsets (tokenizers >= 0.20)
    fn = getattr(tok, name, None)
    if fn is None:
        continue
    best = 1e9
    for _ in range(3):
        t = time.perf_counter()
        out = fn(lines, add_special_tokens=False)
        best = min(best, time.perf_counter() - t)
    res.append(f"{name}={best}")
print(" ".join(res))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--headwise", default=os.path.join(ROOT, "build", "headwise"))
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--text")
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "tests", "fixtures", "tokenizers", "gpt2_style.json"))
    a = ap.parse_args()
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "--user", "--quiet", "tokenizers"], check=True)
    tmp = tempfile.mkdtemp()
    try:
        text = a.text
        if not text:
            text = os.path.join(tmp, "kjv.txt")
            env = dict(os.environ)
            env.pop("COLUMNS", None)
            with open(text, "wb") as f:
                subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], check=True, stdout=f, env=env)
        mb = os.path.getsize(text) / 1e6
        print(f"corpus {text}: {mb:.2f} MB; tokenizer {a.tokenizer}")
        for th in a.threads:
            best = 1e9
            for rep in range(3):
                out = os.path.join(tmp, f"hw_{th}_{rep}")
                t = time.perf_counter()
                subprocess.run([a.headwise, "prepare", "--input", text, "--output", out, "--tokenizer", a.tokenizer,
                                "--threads", str(th), "--val-fraction", "0.01"], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                best = min(best, time.perf_counter() - t)
                shutil.rmtree(out)
            env = dict(os.environ, RAYON_NUM_THREADS=str(th), TOKENIZERS_PARALLELISM="true")
            r = subprocess.run([sys.executable, "-c", PY_BENCH, a.tokenizer, text], check=True, capture_output=True,
                               text=True, env=env)
            hw_rate = mb / best
            line = f"threads {th}: headwise prepare {hw_rate:.2f} MB/s ({best:.2f} s)"
            for item in r.stdout.split():
                name, sec = item.split("=")
                py_rate = mb / float(sec)
                line += f"; tokenizers {name} {py_rate:.2f} MB/s ({float(sec):.2f} s), ratio {hw_rate / py_rate:.2f}x"
            print(line)
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
