#!/usr/bin/env bash
# Batched decoding, headwise against llama.cpp's llama-batched-bench on the same weights (issue
# 54): total decode tokens/s of B sequences at context N, headwise all-softmax beside llama.cpp
# with the ratio, fp32/F32 and bf16/F16; then the AoH row: the plan AoH makes of the model (50% of
# the KV heads streaming, sink 64, window 256) against all-softmax at one long context and batch,
# tokens/s and peak RSS, beside the paper's claim (scripts/bench_batched_vs_llamacpp.py).
# llama.cpp: the same pinned source package and build tree as bench_decode_vs_llamacpp.sh
# (scripts/llamacpp_build.sh), plus the llama-batched-bench target; the GGUF is made by the same
# conversion (bench_decode_vs_llamacpp.py), so an OUT shared with that script reuses its files.
# Usage: bash scripts/bench_batched_vs_llamacpp.sh [CKPT]   (default: the Qwen2.5-0.5B shape of
#   scripts/bench_qwen_cpu.py's make_model, random weights, made under OUT once)
# Environment: HEADWISE_BIN (build/headwise), OUT (runs/bench_batched_llamacpp), THREADS (2),
#   BATCHES (1,4,16), CONTEXTS (512,2048), TG (32: decode steps per run; a run's prompts have
#   N - TG tokens), PRECISIONS (fp32,bf16), HW_KV (headwise's --kv-cache: fp16, llama.cpp's
#   default), AOH_CONTEXT (8192; 0 skips the AoH row), AOH_BATCH (8), ROUNDS (1), PYTHON
#   (build/pyvenv/bin/python: torch, transformers, safetensors, sentencepiece), LLAMA_CACHE
#   (~/.cache/headwise/llamacpp), SMOKE=1 (a tiny Qwen2-shaped model, B = 1,2, contexts 64,128,
#   the AoH row at 256 with sink 4, window 16: seconds; what tests/scripts run). Skips (exit 77)
#   when llama.cpp cannot be fetched or built, or (SMOKE=1) when its libraries are not built yet.
#   SHARED=1: one prompt per batch on both sides, prefilled once and its cache copied to every
#   sequence (llama-batched-bench -pps, bench-infer --shared-prompt): the same decode steps, the
#   prefill B times shorter (the AoH row at 8K x 8: minutes instead of an hour).
set -euo pipefail
cd "$(dirname "$0")/.."
CKPT=${1:-}
HW=${HEADWISE_BIN:-build/headwise}
PY=${PYTHON:-build/pyvenv/bin/python}
CACHE=${LLAMA_CACHE:-$HOME/.cache/headwise/llamacpp}
SMOKE=${SMOKE:-0}
skip() { echo "bench_batched_vs_llamacpp: SKIP: $*" >&2; exit 77; }
[ -x "$HW" ] || { echo "error: $HW is not built (cmake --build build --target headwise)" >&2; exit 1; }
[ -x "$PY" ] || skip "no Python at $PY (scripts/python_env.sh makes build/pyvenv)"
. scripts/llamacpp_build.sh
BENCH="$LLAMA_BLD/bin/llama-batched-bench"
if [ ! -x "$BENCH" ]; then
  # The smoke run never builds the libraries (about 10 minutes of 2 cores): only the one target.
  [ "$SMOKE" = 1 ] && [ ! -f "$LLAMA_BLD/src/libllama.a" ] && skip "llama.cpp is not built under $LLAMA_BLD (run this script once without SMOKE)"
  llamacpp_fetch
  llamacpp_build llama-batched-bench
fi
"$PY" -c "import sentencepiece" 2>/dev/null || "$PY" -m pip install --quiet sentencepiece \
  || skip "cannot install sentencepiece (llama.cpp's converter needs it for Llama-family models)"
if [ "$SMOKE" = 1 ]; then
  set -- --smoke
  DEF_OUT=${OUT:-$(mktemp -d)}
else
  set -- --ckpt "$CKPT"
  DEF_OUT=${OUT:-runs/bench_batched_llamacpp}
fi
exec "$PY" scripts/bench_batched_vs_llamacpp.py "$@" --headwise "$HW" --batched-bench "$BENCH" --llama-src "$LLAMA_SRC" \
  --out "$DEF_OUT" --tokenizer tests/fixtures/tokenizers/gpt2_style.json --threads "${THREADS:-2}" \
  --batches "${BATCHES:-}" --contexts "${CONTEXTS:-}" --tg "${TG:-}" --precisions "${PRECISIONS:-fp32,bf16}" \
  --hw-kv "${HW_KV:-fp16}" --aoh-context "${AOH_CONTEXT:-}" --aoh-batch "${AOH_BATCH:-}" --rounds "${ROUNDS:-1}" \
  $([ "${SHARED:-0}" = 1 ] && echo --shared-prompt)
