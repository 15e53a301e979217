#!/usr/bin/env bash
# SAF's causal-prefill benchmark script (scripts/reproduce/saf_prefill.sh, SAF Appendix D.3) at its
# --smoke size: two tiny SAF checkpoints (25% = 1 of 4 heads static, 50% = 2 of 4), each timed by
# bench-infer against every head softmax on the same weights at T 16 and 32. Checked: the
# checkpoints hold 1 and 2 static (V-only) heads, every table row is there, and each speedup is
# ordinary's median prefill ms over SAF's, recomputed here from bench-infer's own JSON. Bad
# input: --scale gpu (no timed CUDA prefill benchmark) and a missing checkpoint are one `error:` line each.
# Usage: test_saf_prefill.sh HEADWISE_BIN
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
hw=$(realpath "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }
one_error() {
  local err rc=0
  err=$("$@" 2>&1 >/dev/null) || rc=$?
  if [ "$rc" = 0 ] || [ "$(printf '%s\n' "$err" | wc -l)" != 1 ] || [[ "$err" != error:* ]]; then
    bad "expected one error line from: $*; got rc $rc: $err"
  else
    echo "ok: $err"
  fi
}
out=$tmp/pf
HEADWISE_BIN=$hw bash "$root/scripts/reproduce/saf_prefill.sh" --smoke --out "$out" > /dev/null
grep -q 'KV heads (checkpoint): 3 full, 0 sink+ring, 1 V-only' "$out/bench/25_T16.log" || bad "25%: not 1 static head of 4"
grep -q 'KV heads (checkpoint): 2 full, 0 sink+ring, 2 V-only' "$out/bench/50_T32.log" || bad "50%: not 2 static heads of 4"
python3 - "$out" <<'PY' || fail=1
import json, sys
out = sys.argv[1]
md = open(f"{out}/prefill.md").read()
n = 0
for r in (25, 50):
    for t in (16, 32):
        j = json.load(open(f"{out}/bench/{r}_T{t}.json"))
        saf, ordi = j["plan"]["prefill_median_ms"], j["all_softmax"]["prefill_median_ms"]
        assert j["context"] == t and j["plan_source"] == "checkpoint", (r, t)
        want = f"| {t} | {r}% | 1 | {saf:.3f} | {ordi:.3f} | {ordi / saf:.3f}x |"
        if want not in md:
            print(f"FAIL: prefill.md lacks {want}", file=sys.stderr)
            sys.exit(1)
        n += 1
print(f"ok: {n} rows, speedup = ordinary / SAF median prefill ms")
PY
grep -q '^# SAF causal prefill' "$out/REPORT.md" || bad "no REPORT.md"
[ "$(wc -l < "$out/prefill.csv")" = 5 ] || bad "prefill.csv: not a header and 4 rows"
one_error env HEADWISE_BIN="$hw" bash "$root/scripts/reproduce/saf_prefill.sh" --scale gpu --out "$tmp/g"
err=$(HEADWISE_BIN="$hw" bash "$root/scripts/reproduce/saf_prefill.sh" --scale gpu --out "$tmp/g" 2>&1 || true)
[[ "$err" == *"needs a timed CUDA prefill benchmark"* ]] || bad "--scale gpu: the error does not say the CUDA prefill path is missing: $err"
one_error env CKPT_25="$tmp/none" CKPT_50="$tmp/none" HEADWISE_BIN="$hw" bash "$root/scripts/reproduce/saf_prefill.sh" --out "$tmp/c"
exit $fail
