#!/usr/bin/env python3
"""Keeps the docs true to the code (ctest docs:consistent):
1. docs/command-line.md's reference equals `headwise CMD --help` (scripts/gen_cli_docs.py --check);
2. every config key the parsers take (`headwise config`, with each family, LoRA and each method)
   has a row in its page's key table: model/train/data in docs/configuration.md, model.lora in
   docs/checkpoints.md, method M in docs/methods/M.md;
3. every relative link in README.md and docs/ resolves, anchors included.
Usage: test_docs.py SOURCE_DIR HEADWISE_BINARY
"""
import glob
import json
import os
import re
import subprocess
import sys

src, binary = sys.argv[1], os.path.abspath(sys.argv[2])
failures = []


def headwise(*args):
    return json.loads(subprocess.run([binary, *args], capture_output=True, text=True, check=True).stdout)


# 1. the CLI reference
r = subprocess.run([sys.executable, os.path.join(src, "scripts/gen_cli_docs.py"), binary,
                    os.path.join(src, "docs/command-line.md"), "--check"], capture_output=True, text=True)
if r.returncode != 0:
    failures.append(r.stderr.strip() or "gen_cli_docs.py --check failed")


# 2. config keys
def table_keys(page):
    """Words of the first cell of every table row of a page (`model.n_layer / n_head` -> n_layer, n_head)."""
    words = set()
    for line in open(os.path.join(src, page), encoding="utf-8"):
        if line.startswith("|") and not line.startswith("|---"):
            cell = line.split("|")[1]
            for w in re.findall(r"[A-Za-z0-9_.]+", cell):
                words.add(w)
                words.add(w.split(".")[-1])
    return words


def need(page, section, keys):
    have = table_keys(page)
    for k in sorted(keys):
        if k not in have and f"{section}.{k}" not in have:
            failures.append(f"config key {section}.{k} has no row in {page}'s key table")


gpt2 = headwise("config")
qwen3 = headwise("config", "--set", "model.family=qwen3", "--set", "model.pos=rope", "--set", "model.lora.rank=4")
for section in ("model", "train", "data"):
    keys = set(gpt2[section]) | set(qwen3[section])
    need("docs/configuration.md", section, keys - {"lora"})
need("docs/checkpoints.md", "model.lora", set(qwen3["model"]["lora"]))
methods = sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(src, "src/methods/*/entry.cpp")))
if len(methods) < 4:
    failures.append(f"found only {methods} under src/methods/*/entry.cpp")
for m in methods:
    page = f"docs/methods/{m}.md"
    if not os.path.exists(os.path.join(src, page)):
        failures.append(f"method {m} has no page {page}")
        continue
    cfg = headwise("config", "--method", m, "--set", "model.block_size=4096")
    need(page, "method", set(cfg["method"]) - {"name"})

# 3. links
def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    out, fence = set(), False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            out.add(slug(line.lstrip("#")))
    return out


pages = [os.path.join(src, "README.md")] + glob.glob(os.path.join(src, "docs/**/*.md"), recursive=True)
for page in pages:
    text = open(page, encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # links inside code blocks are not links
    if "]()" in text:
        failures.append(f"{os.path.relpath(page, src)}: an empty link target ]()")
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+://", target) or target.startswith("mailto:"):
            continue
        path, _, frag = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        where = os.path.relpath(page, src)
        if not os.path.exists(dest):
            failures.append(f"{where}: link {target} points to a missing file")
        elif frag and dest.endswith(".md") and frag not in anchors(dest):
            failures.append(f"{where}: link {target}: no heading #{frag} in {os.path.relpath(dest, src)}")

for f in failures:
    print("FAIL:", f)
print(f"docs: {len(failures)} problem(s); {len(pages)} pages, {len(methods)} methods checked")
sys.exit(1 if failures else 0)
