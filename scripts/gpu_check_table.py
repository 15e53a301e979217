#!/usr/bin/env python3
"""The GPU check's one table: parity result, training throughput vs PyTorch, attention per layer.

Usage: gpu_check_table.py LOG_DIR PARITY_EXIT_CODE [NCCL_EXIT_CODE] (called by scripts/gpu_check.sh). Reads the JSON
the check wrote; a missing or failed measurement prints as "-" with its error, never a made-up number.
"""
import json
import os
import sys


def load(path):
    """The last JSON line of a file, or {} when there is none."""
    try:
        lines = [l for l in open(path) if l.strip().startswith(("{", "["))]
        return json.loads(lines[-1]) if lines else {}
    except (OSError, ValueError):
        return {}


def fmt(x, spec=".1f"):
    return "-" if x is None else format(x, spec)


def main():
    logs, parity_rc = sys.argv[1], int(sys.argv[2])
    nccl_rc = int(sys.argv[3]) if len(sys.argv) > 3 else -1
    gpu = open(os.path.join(logs, "gpu.txt")).read().strip() if os.path.exists(os.path.join(logs, "gpu.txt")) else "?"
    parity_tail = ""
    try:
        parity_tail = [l.strip() for l in open(os.path.join(logs, "test_cuda.log")) if l.strip()][-1]
    except (OSError, IndexError):
        pass
    print(f"\n## headwise GPU check on {gpu}\n")
    if parity_rc == -1:
        print("CUDA parity tests: not run (--no-parity)\n")
    else:
        print(f"CUDA parity tests: {'PASSED' if parity_rc == 0 else 'SKIPPED' if parity_rc == 77 else 'FAILED'}"
              f" (exit {parity_rc}; {parity_tail})\n")
    if nccl_rc == -1:
        print("NCCL communicator, one rank: not run (no test_dist in the build)\n")
    else:
        nccl_tail = ""
        try:
            nccl_tail = [l.strip() for l in open(os.path.join(logs, "test_nccl.log")) if l.strip()][-1]
        except (OSError, IndexError):
            pass
        print(f"NCCL communicator, one rank (test_dist, HEADWISE_TEST_NCCL=1): "
              f"{'PASSED' if nccl_rc == 0 else 'FAILED'} (exit {nccl_rc}; {nccl_tail})\n")
    try:  # after a failure, each case rerun in its own process
        cases = [l.rstrip("\n") for l in open(os.path.join(logs, "test_cuda_cases.txt")) if l.strip()]
        failed = [c for c in cases if not c.startswith("passed")]
        print(f"Cases rerun one per process: {len(cases) - len(failed)} of {len(cases)} passed alone")
        for c in failed:
            print(f"  {c}")
        print()
    except OSError:
        pass

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
        speed = hw["tok_per_s"] / base[4096] if hw.get("tok_per_s") and base.get(4096) else None
        print(f"| 124M T=4096, {frac}% static | {fmt(hw.get('ms_per_step'), '.2f')} | {fmt(hw.get('tok_per_s'), '.0f')} |"
              f" {fmt(hw.get('mfu'), '.3f')} | - | - | - | - | update speedup vs all-softmax {fmt(speed, '.3f')}"
              f" (goal {goal}, paper {paper}) |" + (f" error: {hw['error']}" if "error" in hw else ""))

    sdpa = {}
    try:
        for line in open(f"{logs}/attn_sdpa.jsonl"):
            r = json.loads(line)
            sdpa[(r["seq"], r["dtype"])] = r["fwd_bwd_ms"]
    except (OSError, ValueError):
        pass
    for name, label in (("attn_layer", "fp32 activations"), ("attn_layer_bf16", "bf16 activations")):
        attention_table(load(f"{logs}/{name}.json"), sdpa, label, name)


def attention_table(rows, sdpa, label, name):
    """One layer's attention per plan composition, against our softmax and PyTorch SDPA."""
    if not (isinstance(rows, list) and rows):
        print(f"\nattention per layer ({label}): no result (see {name}.err)")
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
