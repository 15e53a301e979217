#!/usr/bin/env python3
"""Keeps docs/head-plans.md's "Adding a head kind" true (ctest docs:kind_files): the files that
section lists (`<kind>` standing for the kind's name) are exactly the files under src/ and include/,
the methods aside (src/methods/, include/headwise/methods/: a method may name the kinds it
chooses), that name TaylorShift. A file that names it without being listed (a kind's knowledge
leaking into shared code) or a listed file that no longer does (the list is stale) is one line each.
Usage: test_kind_files.py SOURCE_DIR [KIND]   (KIND default: taylorshift)
"""
import os
import re
import sys

src = os.path.abspath(sys.argv[1])
kind = sys.argv[2] if len(sys.argv) > 2 else "taylorshift"
text = open(os.path.join(src, "docs/head-plans.md"), encoding="utf-8").read()
m = re.search(r"^## Adding a head kind\n(.*?)(?=^## |\Z)", text, re.S | re.M)
if not m:
    sys.exit("docs/head-plans.md: no section '## Adding a head kind'")
listed = set()
# the list items, each with its continuation lines
for item in re.findall(r"^- (.*?)(?=^- |^\s*$|\Z)", m.group(1), re.S | re.M):
    for path in re.findall(r"`((?:src|include)/[^`]+)`", item):
        listed.add(path.replace("<kind>", kind))
if not listed:
    sys.exit("docs/head-plans.md: 'Adding a head kind' lists no files")

naming = set()
for top in ("src", "include"):
    for root, _, files in os.walk(os.path.join(src, top)):
        rel_root = os.path.relpath(root, src)
        if rel_root.startswith(("src/methods", "include/headwise/methods")):
            continue
        for f in files:
            path = os.path.join(root, f)
            with open(path, encoding="utf-8", errors="replace") as fh:
                if kind in fh.read().lower():
                    naming.add(os.path.relpath(path, src))

failures = [f"{p}: names '{kind}' but docs/head-plans.md does not list it" for p in sorted(naming - listed)]
failures += [f"{p}: listed in docs/head-plans.md but does not name '{kind}'" for p in sorted(listed - naming)]
for f in failures:
    print(f)
print(f"{len(naming)} files name '{kind}', {len(listed)} listed, {len(failures)} problems")
sys.exit(1 if failures else 0)
