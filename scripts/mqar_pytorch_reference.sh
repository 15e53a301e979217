#!/usr/bin/env bash
# MQAR from scratch in PyTorch (the reference for headwise's MQAR recipe; see the .py's header):
#   bash scripts/mqar_pytorch_reference.sh [ARGS...]   e.g. --warmup 1, --resid-scale 1, --seed 1
# Installs torch into BENCH_VENV (default ~/.cache/headwise/bench-venv) when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${BENCH_VENV:-$HOME/.cache/headwise/bench-venv}
PY="$VENV/bin/python"
if ! "$PY" -c "import torch" 2>/dev/null; then
  echo "mqar_pytorch_reference: installing torch into $VENV ..." >&2
  python3 -m venv "$VENV"
  "$PY" -m pip install --quiet torch numpy
fi
exec "$PY" scripts/mqar_pytorch_reference.py "$@"
