#!/usr/bin/env bash
# One Python environment for the cross-checks against PyTorch, transformers, PEFT and
# lm-evaluation-harness (ctest scripts, fixture generators, benchmarks): made once per folder,
# shared by every test that names the same folder (a lock keeps concurrent ctest jobs from
# installing twice), and small. PyPI's Linux torch wheel pulls about 5 GB of CUDA libraries
# (cuBLAS, cuDNN, ...) that a CPU-only check never calls; on a machine with the CUDA toolkit in
# /usr/local/cuda (this project's kind), torch is installed without them and finds the toolkit's
# copies instead, plus the four it lacks (NCCL of torch's version, cuSPARSELt, NVSHMEM, cuFile):
# about 1 GB. Elsewhere torch comes with its full dependencies.
#
# Usage: bash scripts/python_env.sh VENV [PIP_SPEC...]
#   Makes VENV if needed, with torch and the given packages (e.g. "transformers==5.24.0"), and
#   writes VENV/bin/hwpy: the venv's python with the CUDA libraries' folder on the loader path.
#   Run Python through it. Exit 77 (ctest: skipped) when something cannot be installed.
set -uo pipefail
VENV=${1:?usage: python_env.sh VENV [PIP_SPEC...]}
shift
# hwpy names the venv's python by this path: make it absolute, or hwpy works only from here.
VENV=$(realpath -m "$VENV")
TORCH=torch==2.15.0
# torch 2.15.0's CUDA dependencies that /usr/local/cuda 13.0 lacks or has in an older version.
TORCH_EXTRA=(nvidia-nccl-cu13==2.30.7 nvidia-cusparselt-cu13==0.8.1 nvidia-nvshmem-cu13==3.7.2 nvidia-cufile==1.20.0.107)
TORCH_PURE=(filelock "typing-extensions>=4.13.0" "setuptools>=77.0.3" "sympy>=1.13.3" "networkx>=2.5.1" jinja2
            "fsspec>=0.8.5" numpy)
CUDA_LIB=/usr/local/cuda/lib64

skip() { echo "SKIP: python_env: $*" >&2; exit 77; }
mkdir -p "$(dirname "$VENV")" || skip "cannot create $(dirname "$VENV")"
# The lock: shared while a caller only checks (and then uses) the venv, exclusive while this
# script installs. Callers that run the venv's Python afterwards hold it shared for as long as
# they do (`exec 8<"$VENV.lock"; flock -s 8`), so that no concurrent ctest job's install swaps a
# package under them (pip resolves each request afresh and may reinstall shared dependencies:
# a fresh-clone CI run lost transformers mid-import that way).
exec 9>"$VENV.lock" || skip "cannot lock $VENV.lock"
flock -s 9
# The installed version of package spec $1 satisfies it.
satisfied() {
  "$VENV/bin/pip" show "${1%%[=<>[]*}" >/dev/null 2>&1 && "$VENV/bin/python" - "$1" >/dev/null 2>&1 <<'PY'
import sys
from importlib.metadata import version
from packaging.requirements import Requirement
r = Requirement(sys.argv[1])
sys.exit(0 if r.specifier.contains(version(r.name), prereleases=True) else 1)
PY
}
ready() {
  [ -x "$VENV/bin/python" ] && [ -x "$VENV/bin/hwpy" ] && "$VENV/bin/hwpy" -c "import torch" >/dev/null 2>&1 || return 1
  for spec in "$@"; do satisfied "$spec" || return 1; done
}
ready "$@" && exit 0
# (Waits for every caller using the venv to finish, then rechecks below. A caller that holds the
# lock and runs this again for packages it lacks would wait for itself: bounded, then skipped.)
flock -x -w 1200 9 || skip "$VENV is in use by another job for 20 minutes; cannot install ${*:-torch}"

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV" >/dev/null 2>&1 || skip "cannot create a venv at $VENV (python3-venv missing?)"
  "$VENV/bin/pip" install --quiet --upgrade pip >/dev/null 2>&1 || true
fi
cat >"$VENV/bin/hwpy" <<EOF
#!/bin/sh
# The venv's python with the CUDA toolkit's libraries on the loader path (scripts/python_env.sh).
LD_LIBRARY_PATH="$CUDA_LIB\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$VENV/bin/python" "\$@"
EOF
chmod +x "$VENV/bin/hwpy"

pip_q() { "$VENV/bin/pip" install --quiet --disable-pip-version-check "$@" >"$VENV.pip.log" 2>&1; }
if ! "$VENV/bin/hwpy" -c "import torch" >/dev/null 2>&1; then
  echo "python_env: installing $TORCH into $VENV" >&2
  if [ -e "$CUDA_LIB/libcudart.so.13" ] && [ -e "$CUDA_LIB/libcudnn.so.9" ]; then
    pip_q --no-deps "$TORCH" "${TORCH_EXTRA[@]}" && pip_q "${TORCH_PURE[@]}" ||
      skip "pip could not install $TORCH (see $VENV.pip.log)"
  else
    pip_q "$TORCH" || skip "pip could not install $TORCH (see $VENV.pip.log)"
  fi
  "$VENV/bin/hwpy" -c "import torch" >/dev/null 2>&1 || skip "torch does not import in $VENV"
fi
if [ $# -gt 0 ]; then
  # Only what is missing: pip keeps the installed torch (it satisfies every torch>= requirement).
  missing=()
  for spec in "$@"; do
    satisfied "$spec" || missing+=("$spec")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "python_env: installing ${missing[*]} into $VENV" >&2
    # pip would resolve the installed torch's own requirements again and fetch the CUDA wheels
    # left out above, so resolve first, then install what it chose minus torch's stack.
    pip_q --dry-run --ignore-installed --report "$VENV.report.json" "${missing[@]}" ||
      skip "pip could not resolve ${missing[*]} (see $VENV.pip.log)"
    mapfile -t chosen < <("$VENV/bin/python" - "$VENV.report.json" <<'PY'
import json, re, sys
for item in json.load(open(sys.argv[1]))["install"]:
    meta = item["metadata"]
    if not re.fullmatch(r"(torch|triton|nvidia-.*|cuda-.*)", meta["name"].lower()):
        print(f"{meta['name']}=={meta['version']}")
PY
)
    pip_q --no-deps "${chosen[@]}" || skip "pip could not install ${missing[*]} (see $VENV.pip.log)"
  fi
fi
exit 0
