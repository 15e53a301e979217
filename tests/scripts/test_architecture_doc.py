#!/usr/bin/env python3
"""Keeps docs/architecture.md true to the tree (ctest docs:architecture):
1. every path it names exists: a repository path (`src/...`, `include/...`, `tests/...`, ...; `<name>`
   and `*` match any name) anywhere in the page, and, inside its code block, a bare file name
   (`model.cpp`) in the folder its line (or the last line that began with a folder) is about;
2. every folder under src/ is named (any depth: src/kernels, src/kernels/cpu, src/methods/<name>,
   src/data/tokenizer, ...), and each top-level folder the repository tracks files in is named or
   has a path under it named (include/ mirrors src/'s areas, so include/headwise/<area> is free).
A src/ folder counts as named when the page writes its path exactly (`src/data/`, with or without
the slash), not when only a subfolder or a file in it is named. Prints one line per problem.
Usage: test_architecture_doc.py SOURCE_DIR [PAGE]   (PAGE default: docs/architecture.md)
"""
import glob
import os
import re
import subprocess
import sys

src = os.path.abspath(sys.argv[1])
page = sys.argv[2] if len(sys.argv) > 2 else "docs/architecture.md"
text = open(os.path.join(src, page), encoding="utf-8").read()
failures = []
TOP = ("src", "include", "tests", "scripts", "python", "bench", "configs", "docs", "cmake", ".ci")
# A repository path: a top-level folder, then name characters; <placeholders> and * allowed.
PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./<>*{}-]*|CMakeLists\.txt)" % "|".join(re.escape(t) for t in TOP))
# A bare source file name (formats such as tokenizer.json are not paths).
FILE = re.compile(r"(?<![\w./-])([\w-]+\.(?:cpp|hpp|cu|cuh|h|py|sh|in))(?![\w/])")


def exists(path):
    pattern = re.sub(r"<[^>]*>", "*", path.rstrip("/.,:;"))
    return bool(glob.glob(os.path.join(src, pattern)))


# 1a. every repository path, anywhere in the page
named = set()
for path in PATH.findall(text):
    path = path.rstrip(".,:;")
    named.add(path.rstrip("/"))
    if not exists(path):
        failures.append(f"{page} names {path}, which does not exist")

# 1b. bare file names in the code block, against the folder of their line
fence, folder = False, None
for n, line in enumerate(text.splitlines(), 1):
    if line.startswith("```"):
        fence = not fence
        folder = None
        continue
    if not fence:
        continue
    first = PATH.match(line.strip())
    if first and line[:1] != " ":
        folder = first.group(1).rstrip(".,:;")
        if not folder.endswith("/"):
            folder = os.path.dirname(folder)
    for name in FILE.findall(PATH.sub("", line)):
        if folder is None:
            failures.append(f"{page}:{n}: {name} is on a line that names no folder")
        elif not exists(os.path.join(folder, name)) and not glob.glob(os.path.join(src, folder, "**", name),
                                                                        recursive=True):
            failures.append(f"{page}:{n}: {name} is not in {folder}")

# 2. every folder that must be named
def has_source(d):
    return any(not f.startswith(".") for f in os.listdir(d) if os.path.isfile(os.path.join(d, f))) or any(
        os.path.isdir(os.path.join(d, f)) for f in os.listdir(d))


need = []
for d, dirs, _ in os.walk(os.path.join(src, "src")):
    dirs[:] = sorted(x for x in dirs if not x.startswith(".") and x != "__pycache__")
    rel = os.path.relpath(d, src)
    if rel != "src" and has_source(d):
        need.append(rel)
for d in need:
    if d not in named:
        failures.append(f"{page} does not name the folder {d}/")
try:
    tracked = subprocess.run(["git", "-C", src, "ls-files"], capture_output=True, text=True, check=True).stdout.split()
    tops = sorted({p.split("/")[0] for p in tracked if "/" in p and not p.startswith(".")})
except (OSError, subprocess.CalledProcessError):  # not a git checkout (a source tarball): src/ alone
    tops = ["src"]
for top in tops:
    if top not in named and not any(p.startswith(top + "/") for p in named):
        failures.append(f"{page} names nothing under the top-level folder {top}/")
need += tops

for f in failures:
    print("FAIL:", f)
print(f"{page}: {len(failures)} problem(s); {len(named)} paths named, {len(need)} folders required")
sys.exit(1 if failures else 0)
