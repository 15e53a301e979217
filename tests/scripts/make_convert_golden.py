#!/usr/bin/env python3
"""Record what `headwise convert` makes of every family's tiny fixture (tests/fixtures/hf_tiny_*)
with AoH, SAF and OAL: per tensor of the converted weights, a 64-bit FNV-1a hash of its values as
little-endian float32 (int32 for int tensors), and the eval loss of the converted checkpoint on
the calibration shard. tests/cli/test_convert_golden.cpp runs the same commands with the binary
under test and compares. Recorded with the binary of main at a403f1d (before issue 55 changed the
loader, the plan install, the calibration stream and the writer), so the test holds the new paths
to the old one's numbers.

Usage: python3 tests/scripts/make_convert_golden.py HEADWISE_BIN > tests/fixtures/convert_golden/golden.json
"""
import array
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIX = os.path.join(ROOT, "tests", "fixtures")
GOLD = os.path.join(FIX, "convert_golden")

# The commands (shared with the C++ test, which reads them from golden.json).
METHODS = {
    "aoh": "--set method.sink=2 --set method.window=4",
    "saf": "--calib {calib} --set method.calib_seqs=4 --set method.fit_steps=50 --seq-len 32",
    "oal": ("--calib {calib} --set method.layers=1 --set method.stats_prompts=4 --set method.fit_seqs=2 "
            "--set method.val_seqs=1 --set method.bootstrap=20 --set method.max_updates=40 --set method.val_every=20 "
            "--seq-len 32"),
}
EVAL = "--batches 2 --micro-batch 2 --seq-len 32"


def fnv1a(data, h=0xcbf29ce484222325):
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def tensors(ckpt):
    files = [f for f in sorted(os.listdir(ckpt)) if f.endswith(".safetensors") and not f.startswith("adapter")]
    out = {}
    for f in files:
        b = open(os.path.join(ckpt, f), "rb").read()
        n = struct.unpack("<Q", b[:8])[0]
        head = json.loads(b[8:8 + n])
        for k, v in head.items():
            if k == "__metadata__":
                continue
            s, e = v["data_offsets"]
            raw = b[8 + n + s:8 + n + e]
            if v["dtype"] == "F32":
                vals = raw
            elif v["dtype"] == "BF16":
                a = array.array("H")
                a.frombytes(raw)
                vals = b"".join(struct.pack("<I", x << 16) for x in a)
            elif v["dtype"] == "I32":
                vals = raw
            else:
                sys.exit(f"{ckpt}: tensor {k} has dtype {v['dtype']}")
            out[k] = f"{fnv1a(vals):016x}"
    return out


def main():
    hw = sys.argv[1]
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        for fam in ["gpt2", "llama", "qwen2", "qwen3"]:
            calib = os.path.join(GOLD, "calib_v64.bin" if fam == "gpt2" else "calib_v96.bin")
            for method, args in METHODS.items():
                out = os.path.join(tmp, f"{fam}_{method}")
                cmd = [hw, "convert", "--checkpoint", os.path.join(FIX, f"hf_tiny_{fam}"), "--out", out, "--method",
                       method] + args.format(calib=calib).split()
                subprocess.run(cmd, check=True, capture_output=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
                ev = subprocess.run([hw, "eval", "--checkpoint", out, "--data", calib] + EVAL.split(), check=True,
                                    capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
                loss = json.loads(ev.stdout.strip().splitlines()[-1])["loss"]
                cases.append({"family": fam, "method": method, "tensors": tensors(out), "eval_loss": loss})
    print(json.dumps({"recorded_with": "main at a403f1d", "methods": METHODS, "eval": EVAL, "cases": cases}, indent=1))


if __name__ == "__main__":
    main()
