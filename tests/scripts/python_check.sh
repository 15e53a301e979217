# shellcheck shell=bash
# The start every transformers cross-check shares (test_hf_roundtrip.sh, test_pretrained_methods.sh,
# test_hf_remote_code.sh, test_peft_adapters.sh, test_peft_mixed.sh), sourced first:
#   . "$(dirname "$0")/python_check.sh" HEADWISE [VENV] [SPEC...]
# Sets HW (the binary), SRC (the repository), VENV (default ~/.cache/headwise/pyvenv, shared with
# the other cross-checks), PY (its Python) and TMP (removed on exit); makes VENV hold torch,
# transformers 5.24.0, safetensors and SPEC... (scripts/references.sh: a skip, 77, only when the
# package index cannot be reached; a failure in CI mode); keeps the hub offline (fixtures are made
# here, nothing is downloaded); defines field NAME (a key of the last JSON line on stdin).
set -euo pipefail
HW=$1
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV=${2:-$HOME/.cache/headwise/pyvenv}
. "$SRC/scripts/references.sh"
python_reference "$VENV" torch "transformers==5.24.0" safetensors "${@:3}"
"$PY" -c "import torch, transformers" 2>/dev/null || { echo "FAIL: torch/transformers do not import from $VENV"; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} HF_HUB_OFFLINE=1 HF_HOME=$TMP/hf TRANSFORMERS_VERBOSITY=error
field() { "$PY" -c "import json, sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])['$1'])"; }
