#!/usr/bin/env bash
# Regenerate the Llama-family fixtures (tests/fixtures/hf_tiny_{llama,qwen2,qwen3}) with
# transformers: torch + transformers from PyPI go into a virtual environment (BENCH_VENV, default
# ~/.cache/headwise/bench-venv, created when missing), never into the system Python.
# Usage: bash scripts/gen_llama_fixtures.sh
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${BENCH_VENV:-$HOME/.cache/headwise/bench-venv}
PY="$VENV/bin/python"
if ! "$PY" -c "import torch, transformers, safetensors" 2>/dev/null; then
  echo "gen_llama_fixtures: installing torch + transformers into $VENV ..." >&2
  python3 -m venv "$VENV"
  "$PY" -m pip install --quiet torch transformers safetensors
fi
"$PY" tests/reference/make_llama_fixtures.py
