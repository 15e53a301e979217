#!/usr/bin/env python3
"""Registers, stack and spills of every kernel, from ptxas's -v report in a build log.

Usage: gpu_kernel_resources.py BUILD_LOG  (scripts/gpu_bundle.sh writes the log with -Xptxas=-v and
keeps the result beside the binaries as kernel_resources.txt; gpu_check's table shows it).
Prints one row per function ptxas reported: kernels (entry functions, with their registers) and
device functions it kept out of line (stack and spills only), demangled, largest spill first.
"""
import re
import subprocess
import sys

ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\d+a?)'")
PROPS = re.compile(r"Function properties for (\S+)")
FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers")


def demangle(names):
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
        return dict(zip(names, out.splitlines()))
    except (OSError, subprocess.CalledProcessError):
        return {n: n for n in names}


def main():
    rows = {}  # (name, arch) -> {"entry", "regs", "stack", "spill_st", "spill_ld"}
    entry, arch, current = None, "", None
    for line in open(sys.argv[1], errors="replace"):
        if m := ENTRY.search(line):
            entry, arch = m.group(1), m.group(2)
            rows.setdefault((entry, arch), {"entry": True})
        elif m := PROPS.search(line):
            current = (m.group(1), arch)
            rows.setdefault(current, {"entry": m.group(1) == entry})
        elif (m := FRAME.search(line)) and current:
            rows[current].update(stack=int(m.group(1)), spill_st=int(m.group(2)), spill_ld=int(m.group(3)))
        elif (m := USED.search(line)) and entry:
            rows[(entry, arch)]["regs"] = int(m.group(1))
    names = demangle(sorted({n for n, _ in rows}))
    print("kernel | arch | registers | spill stores | spill loads | stack")
    order = sorted(rows.items(), key=lambda kv: (-kv[1].get("spill_st", 0), names[kv[0][0]]))
    for (name, a), r in order:
        kind = "" if r.get("entry") else " (device function)"
        print(f"{names[name][:160]}{kind} | {a} | {r.get('regs', '-')} | spill stores {r.get('spill_st', 0)} |"
              f" spill loads {r.get('spill_ld', 0)} | stack {r.get('stack', 0)}")
    if not rows:
        print("(no ptxas report in the log: was it built with -Xptxas=-v?)")


if __name__ == "__main__":
    main()
