#!/usr/bin/env python3
"""The GPU check's one table: every step's outcome, the probe, what failed and where, then
training throughput against PyTorch and attention per layer.

Usage: gpu_check_table.py LOG_DIR (called by scripts/gpu_check.sh after every step, so a table
exists whenever the run is cut short). Reads what the check wrote in LOG_DIR; a missing or failed
measurement prints as "-" with its error, never a made-up number.
"""
import json
import os
import re
import sys


def load(path):
    """The last JSON line of a file, or {} when there is none."""
    try:
        lines = [l for l in open(path, errors="replace") if l.strip().startswith(("{", "["))]
        return json.loads(lines[-1]) if lines else {}
    except (OSError, ValueError):
        return {}


def lines_of(path):
    try:
        return [l.rstrip("\n") for l in open(path, errors="replace")]
    except OSError:
        return []


def fmt(x, spec=".1f"):
    return "-" if x is None else format(x, spec)


def steps_table(logs):
    rows = [l.split("\t") for l in lines_of(os.path.join(logs, "steps.tsv")) if l.strip()]
    print("| step | result | seconds | detail |")
    print("|---|---|---:|---|")
    for r in rows:
        r += [""] * (4 - len(r))
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3].replace('|', '/')} |")
    print()
    return {r[0]: (r[1], r[3]) for r in rows}


# What a fault says, wherever it was logged: the linear chains' timeout message (item, stage,
# chunk), CUDA errors by name, compute-sanitizer's findings.
FAULT = re.compile(r"linear chain wait timed out|cudaError\w+|CUDA error|Invalid __global__|Invalid __shared__|"
                   r"out of bounds|misaligned|unspecified launch failure|illegal (memory )?address|"
                   r"ERROR SUMMARY: [1-9]")


def faults(logs):
    found = []
    for name in sorted(os.listdir(logs)):
        if not (name.startswith(("test_cuda", "sanitizer_", "probe", "test_nccl")) and name.endswith((".log", ".txt"))):
            continue
        if name == "test_cuda_cases.txt":
            continue
        seen = set()
        for l in lines_of(os.path.join(logs, name)):
            if FAULT.search(l) and l.strip() not in seen:
                seen.add(l.strip())
                found.append(f"{name}: {l.strip()[:300]}")
    return found


def main():
    logs = sys.argv[1]
    gpu = " ".join(lines_of(os.path.join(logs, "gpu.txt"))).strip() or "?"
    print(f"\n## headwise GPU check on {gpu}\n")
    steps = steps_table(logs)

    probe = load(os.path.join(logs, "probe.log"))
    if probe:
        print("Probe: " + "; ".join(f"{k} {probe[k]}" for k in ("device", "sm", "multiprocessors", "memory_mib",
                                                                   "optin_smem_bytes", "driver_api", "runtime_api",
                                                                   "nccl_version") if k in probe))
        for k in ("runtime", "kernel", "cublaslt", "nccl"):
            if k in probe:
                print(f"  {k}: {probe[k]}")
        print()
    for l in lines_of(os.path.join(logs, "clocks.txt")):
        print(f"GPU clocks (SM, max SM, memory, temperature, power, utilization) {l}")
    if os.path.exists(os.path.join(logs, "clocks.txt")):
        print()

    if "parity" in steps:
        status, detail = steps["parity"]
        tail = [l for l in lines_of(os.path.join(logs, "test_cuda.log")) if l.strip()]
        if status in ("skipped", "not run"):
            print(f"CUDA parity tests: not run ({detail})\n")
        else:
            print(f"CUDA parity tests: {'PASSED' if status == 'ok' else status} "
                  f"({tail[-1].strip() if tail else 'no output'})\n")
    cases = [l for l in lines_of(os.path.join(logs, "test_cuda_cases.txt")) if l.strip()]
    if cases:
        failed = [c for c in cases if not c.startswith("passed")]
        print(f"Cases rerun one per process (CUDA_LAUNCH_BLOCKING=1): {len(cases) - len(failed)} of {len(cases)}"
              " passed alone")
        for c in failed:
            print(f"  {c}")
        print()
    sanitized = lines_of(os.path.join(logs, "sanitize_cases.txt"))
    for i, name in enumerate(sanitized, 1):
        summary = [l for l in lines_of(os.path.join(logs, f"sanitizer_{i}.log")) if "ERROR SUMMARY" in l]
        print(f"compute-sanitizer memcheck, {name}: {summary[-1].strip() if summary else 'no summary (see log)'}")
    if sanitized:
        print()
    found = faults(logs)
    if found:
        print("Faults named in the logs:")
        for f in found[:40]:
            print(f"  {f}")
        print()
    if "nccl" in steps:
        tail = [l for l in lines_of(os.path.join(logs, "test_nccl.log")) if l.strip()]
        print(f"NCCL communicator, one rank (test_dist, HEADWISE_TEST_NCCL=1): "
              f"{'PASSED' if steps['nccl'][0] == 'ok' else steps['nccl'][0]} ({tail[-1].strip() if tail else steps['nccl'][1]})\n")
    resources = [l for l in lines_of(os.path.join(logs, "kernel_resources.txt")) if l.strip()]
    if resources:
        print("Kernel resources at bundle time (ptxas; the attention kernels and every kernel that spills):")
        for l in resources:
            if "attention" in l or re.search(r"spill (stores|loads) [1-9]", l) or l.startswith(("|", "kernel")):
                print(f"  {l}")
        print()

    print("| run | headwise ms/update | headwise tok/s | MFU | peak GiB | PyTorch ms/update | PyTorch tok/s |"
          " PyTorch MFU | headwise/PyTorch |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    base = {}
    for T in (1024, 4096):
        hw, pt = load(f"{logs}/hw_t{T}.json"), load(f"{logs}/pt_t{T}.json")
        base[T] = hw.get("tok_per_s")
        ratio = hw["tok_per_s"] / pt["tok_per_s"] if hw.get("tok_per_s") and pt.get("tok_per_s") else None
        peak = hw.get("peak_bytes")
        print(f"| 124M T={T} | {fmt(hw.get('ms_per_step'), '.2f')} | {fmt(hw.get('tok_per_s'), '.0f')} |"
              f" {fmt(hw.get('mfu'), '.3f')} | {fmt(peak / 2**30 if peak else None, '.2f')} |"
              f" {fmt(pt.get('ms_per_step'), '.2f')} | {fmt(pt.get('tok_per_s'), '.0f')} | {fmt(pt.get('mfu'), '.3f')} |"
              f" {fmt(ratio, '.2f')} |" + (f" error: {hw['error']}" if "error" in hw else "")
              + (f" PyTorch error: {pt['error']}" if "error" in pt else ""))
    hw = load(f"{logs}/hw_t1024_fp32.json")  # the same run with fp32 storage and TF32 GEMMs
    if hw:
        print(f"| 124M T=1024, fp32 storage + TF32 | {fmt(hw.get('ms_per_step'), '.2f')} | {fmt(hw.get('tok_per_s'), '.0f')} |"
              f" {fmt(hw.get('mfu'), '.3f')} | - | - | - | - | bf16 speedup over fp32"
              f" {fmt(base[1024] / hw['tok_per_s'] if hw.get('tok_per_s') and base.get(1024) else None, '.2f')} |"
              + (f" error: {hw['error']}" if "error" in hw else ""))
    for frac, goal, paper in ((25, 1.10, 1.056), (50, 1.20, 1.119)):
        hw = load(f"{logs}/hw_t4096_static{frac}.json")
        if not hw:
            continue
        speed = hw["tok_per_s"] / base[4096] if hw.get("tok_per_s") and base.get(4096) else None
        print(f"| 124M T=4096, {frac}% static | {fmt(hw.get('ms_per_step'), '.2f')} | {fmt(hw.get('tok_per_s'), '.0f')} |"
              f" {fmt(hw.get('mfu'), '.3f')} | - | - | - | - | update speedup vs all-softmax {fmt(speed, '.3f')}"
              f" (goal {goal}, paper {paper}) |" + (f" error: {hw['error']}" if "error" in hw else ""))

    sdpa = {}
    for line in lines_of(f"{logs}/attn_sdpa.jsonl"):
        try:
            r = json.loads(line)
            sdpa[(r["seq"], r["dtype"])] = r["fwd_bwd_ms"]
        except (ValueError, KeyError):
            pass
    for name, label in (("attn_layer", "fp32 activations"), ("attn_layer_bf16", "bf16 activations")):
        if os.path.exists(f"{logs}/{name}.txt"):
            attention_table(load(f"{logs}/{name}.json"), sdpa, label, name)


def attention_table(rows, sdpa, label, name):
    """One layer's attention per plan composition, against our softmax and PyTorch SDPA."""
    if not (isinstance(rows, list) and rows):
        print(f"\nattention per layer ({label}): no result (see {name}.txt)")
        return
    print(f"\n| attention, one layer (B=4, 12 heads, d=64), {label} | T | ms fwd+bwd | vs our softmax | ACR | goal |"
          " vs SDPA flash bf16 | vs SDPA fp32 |")
    print("|---|---:|---:|---:|---:|---|---:|---:|")
    for r in rows:
        plan, T, ms, rel, acr = r["plan"], r["T"], r["ms_fwd_bwd"], r["relative_to_softmax"], r["acr"]
        goal = ""
        if plan.startswith(("window", "sink_window")):
            goal = f"<= ACR+0.1 = {acr + 0.1:.3f}: {'met' if rel <= acr + 0.1 else 'NOT met'}"
        elif plan == "linear" and T >= 8192:
            goal = f"< 1: {'met' if rel < 1 else 'NOT met'}"
        bf16, fp32 = sdpa.get((T, "bfloat16")), sdpa.get((T, "float32"))
        print(f"| {plan} | {T} | {ms:.3f} | {rel:.3f} | {acr:.3f} | {goal} | {fmt(ms / bf16 if bf16 else None, '.2f')} |"
              f" {fmt(ms / fp32 if fp32 else None, '.2f')} |")


if __name__ == "__main__":
    main()
