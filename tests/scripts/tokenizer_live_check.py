#!/usr/bin/env python3
"""Compares shards written by `headwise prepare --tokenizer` with the `tokenizers` package's
encode of the same text (add_special_tokens=False). Usage: tokenizer_live_check.py TEXT TOKENIZER SHARD_DIR"""
import glob
import struct
import sys

from tokenizers import Tokenizer


def read_shards(d):
    ids = []
    for split in ("train", "val"):
        for f in sorted(glob.glob(f"{d}/{split}_*.bin")):
            data = open(f, "rb").read()
            magic, version, n = struct.unpack("<3i", data[:12])
            assert magic == 20240520 and version == 1, f
            ids += struct.unpack(f"<{n}H", data[1024:1024 + 2 * n])
    return ids


text = open(sys.argv[1], encoding="utf-8").read()
want = Tokenizer.from_file(sys.argv[2]).encode(text, add_special_tokens=False).ids
got = read_shards(sys.argv[3])
if got != want:
    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    print(f"MISMATCH {sys.argv[2]}: headwise {len(got)} ids, tokenizers {len(want)}; first difference at {first}: "
          f"{got[first:first + 8]} vs {want[first:first + 8]}")
    sys.exit(1)
print(f"ok {sys.argv[2]}: {len(got)} ids equal ({len(text)} chars)")
