#!/usr/bin/env bash
# scripts/bench_batched_vs_llamacpp.sh in its smoke mode (a tiny Qwen2-shaped model, B = 1, 2,
# contexts 64 and 128, the AoH row at 256): every row is there with positive tokens/s on both
# sides, and the AoH row's KV bytes per sequence equal a hand count. Skips (77) when llama.cpp's
# libraries are not built under LLAMA_CACHE (building them takes about 10 minutes of 2 cores: run
# the script once without SMOKE); building only its llama-batched-bench target is allowed.
# Usage: test_bench_batched_llamacpp.sh path/to/headwise [VENV]   (PYTHON=... uses that python instead)
set -euo pipefail
HW=$1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${2:-$HOME/.cache/headwise/pyvenv}
if [ -z "${PYTHON:-}" ]; then
  . "$SRC/scripts/references.sh"
  python_reference "$VENV" torch "transformers==5.24.0" safetensors sentencepiece numpy
  PYTHON=$PY
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
rc=0
SMOKE=1 HEADWISE_BIN="$HW" PYTHON="$PYTHON" OUT="$TMP/out" bash "$SRC/scripts/bench_batched_vs_llamacpp.sh" \
  > "$TMP/log" 2> "$TMP/err" || rc=$?
[ "$rc" = 77 ] && { cat "$TMP/err" >&2; exit 77; }
[ "$rc" = 0 ] || { cat "$TMP/err" "$TMP/log" >&2; echo "FAIL: the smoke run exited $rc"; exit 1; }
"$PYTHON" - "$TMP/log" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
j = json.loads(text[:text.index("\n}\n") + 2])
rows = {(r["precision"], r["context"], r["batch"]): r for r in j["rows"]}
want = {(p, n, b) for p in ("fp32", "bf16") for n in (64, 128) for b in (1, 2)}
assert set(rows) == want, f"rows {sorted(rows)} != {sorted(want)}"
for k, r in rows.items():
    assert r["headwise_tok_s"] > 0 and r["llamacpp_tok_s"] > 0, (k, r)
# The AoH row: 2 layers x 2 KV heads of D = 16, fp16 rows, context 256; one KV head per layer
# streams (sink 4 + window 16 = 20 slots): per layer K and V x 16 x 2 bytes x (256 + 20) rows;
# all-softmax (256 + 256).
assert len(j["aoh"]) == 2, j["aoh"]
for r in j["aoh"]:
    assert r["aoh_kv_bytes_per_seq"] == 2 * 2 * 16 * 2 * (256 + 20) == 35328, r
    assert r["softmax_kv_bytes_per_seq"] == 2 * 2 * 16 * 2 * (256 + 256), r
    assert r["aoh_tok_s"] > 0 and r["softmax_tok_s"] > 0 and r["aoh_peak_rss"] > 0, r
assert "| fp32 / F32 | 64 | 1 |" in text and "(paper -66.0%)" in text
print("ok: 8 batched rows against llama.cpp and the AoH row (KV bytes by hand)")
PY
