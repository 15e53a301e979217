#!/usr/bin/env bash
# headwise decode against llama.cpp on the same weights (issue 41): prefill and decode tok/s,
# peak RSS, GB/s of weights + KV per decode token, greedy-token agreement, fp32/F32 and
# bf16/F16, at 1 and 2 threads (scripts/bench_decode_vs_llamacpp.py has the details).
# llama.cpp comes from PyPI's llama-cpp-python source package (pinned in scripts/llamacpp_build.sh;
# it vendors llama.cpp), downloaded and built for this CPU once under LLAMA_CACHE (about 10 minutes of 2
# cores): a cache outside the repository (e.g. LLAMA_CACHE=/work/cache/llamacpp) serves every
# checkout. A build of another pin is kept beside it, never reused. Skips (exit 77) when the
# package cannot be fetched or built.
# Usage: bash scripts/bench_decode_vs_llamacpp.sh [CKPT]   (default: a GPT-2 124M-shaped random
#   model with the gpt2-style test tokenizer's 3,257 tokens, made under OUT once)
# Environment: HEADWISE_BIN (build/headwise), OUT (runs/bench_llamacpp), THREADS (1,2),
#   PRECISIONS (fp32,bf16), HW_KV (headwise's --kv-cache, fp16 like llama.cpp's), PROMPT (512), NEW (256), ROUNDS (3), PYTHON (build/pyvenv/bin/python:
#   torch, transformers, safetensors, numpy; the converter's own needs), LLAMA_CACHE
#   (~/.cache/headwise/llamacpp).
set -euo pipefail
cd "$(dirname "$0")/.."
CKPT=${1:-}
HW=${HEADWISE_BIN:-build/headwise}
OUT=${OUT:-runs/bench_llamacpp}
PY=${PYTHON:-build/pyvenv/bin/python}
CACHE=${LLAMA_CACHE:-$HOME/.cache/headwise/llamacpp}
skip() { echo "bench_decode_vs_llamacpp: SKIP: $*" >&2; exit 77; }
[ -x "$HW" ] || { echo "error: $HW is not built (cmake --build build --target headwise)" >&2; exit 1; }
[ -x "$PY" ] || skip "no Python at $PY (scripts/python_env.sh makes build/pyvenv)"
. scripts/llamacpp_build.sh  # the pin, LLAMA_SRC, LLAMA_BLD
llamacpp_fetch
SRC=$LLAMA_SRC
BLD=$LLAMA_BLD
GREEDY="$BLD/llama_greedy"
if [ ! -x "$GREEDY" ] || [ ! -x "$BLD/bin/llama-bench" ]; then
  llamacpp_build llama-bench llama
  libs=$(find "$BLD" -name 'libllama.a' -o -name 'libggml*.a' | sort -r | tr '\n' ' ')
  g++ -O2 -std=c++17 -I"$SRC/include" -I"$SRC/ggml/include" scripts/llama_greedy.cpp -o "$GREEDY" \
    -Wl,--start-group $libs -Wl,--end-group -fopenmp -lpthread -ldl || skip "cannot link llama_greedy"
fi
# The converter imports sentencepiece for Llama-family models before it falls back to
# tokenizer.json (Qwen2Model.set_vocab), whatever the checkpoint has.
"$PY" -c "import sentencepiece" 2>/dev/null || "$PY" -m pip install --quiet sentencepiece \
  || skip "cannot install sentencepiece (llama.cpp's converter needs it for Llama-family models)"
exec "$PY" scripts/bench_decode_vs_llamacpp.py --headwise "$HW" --greedy "$GREEDY" --llama-src "$SRC" \
  --ckpt "$CKPT" --out "$OUT" --tokenizer tests/fixtures/tokenizers/gpt2_style.json \
  --threads "${THREADS:-1,2}" --precisions "${PRECISIONS:-fp32,bf16}" --hw-kv "${HW_KV:-fp16}" --prompt "${PROMPT:-512}" \
  --new "${NEW:-256}" --rounds "${ROUNDS:-3}"
