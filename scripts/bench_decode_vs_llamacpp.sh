#!/usr/bin/env bash
# headwise decode against llama.cpp on the same weights (issue 41): prefill and decode tok/s,
# peak RSS, GB/s of weights + KV per decode token, greedy-token agreement, fp32/F32 and
# bf16/F16, at 1 and 2 threads (scripts/bench_decode_vs_llamacpp.py has the details).
# llama.cpp comes from PyPI's llama-cpp-python source package (pinned below; it vendors
# llama.cpp), downloaded and built for this CPU once under LLAMA_CACHE (about 10 minutes of 2
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
PIN=0.3.36  # llama-cpp-python 0.3.36, the newest source package (0.3.16 vendored llama.cpp of 2025-08)
CKPT=${1:-}
HW=${HEADWISE_BIN:-build/headwise}
OUT=${OUT:-runs/bench_llamacpp}
PY=${PYTHON:-build/pyvenv/bin/python}
CACHE=${LLAMA_CACHE:-$HOME/.cache/headwise/llamacpp}
skip() { echo "bench_decode_vs_llamacpp: SKIP: $*" >&2; exit 77; }
[ -x "$HW" ] || { echo "error: $HW is not built (cmake --build build --target headwise)" >&2; exit 1; }
[ -x "$PY" ] || skip "no Python at $PY (scripts/python_env.sh makes build/pyvenv)"
mkdir -p "$CACHE"
SRC="$CACHE/llama_cpp_python-$PIN/vendor/llama.cpp"
if [ ! -f "$SRC/CMakeLists.txt" ]; then
  if [ ! -f "$CACHE/llama_cpp_python-$PIN.tar.gz" ]; then
    echo "bench: fetching llama-cpp-python==$PIN's source package ..." >&2
    "$PY" -m pip download --quiet --no-binary :all: --no-deps "llama-cpp-python==$PIN" -d "$CACHE" \
      || skip "cannot fetch llama-cpp-python==$PIN from the package registry"
  fi
  tar -xzf "$CACHE/llama_cpp_python-$PIN.tar.gz" -C "$CACHE" || skip "cannot unpack llama-cpp-python==$PIN"
fi
BLD="$CACHE/build-$PIN-cpu"
GREEDY="$BLD/llama_greedy"
if [ ! -x "$GREEDY" ] || [ ! -x "$BLD/bin/llama-bench" ]; then
  echo "bench: building llama.cpp (CPU, native) once under $BLD ..." >&2
  cmake -S "$SRC" -B "$BLD" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF \
    -DGGML_CCACHE=OFF >/dev/null || skip "cannot configure llama.cpp"
  cmake --build "$BLD" -j2 --target llama-bench llama >/dev/null || skip "cannot build llama.cpp"
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
