#!/usr/bin/env bash
# One Python environment for the cross-checks against PyTorch, transformers, PEFT,
# lm-evaluation-harness and tokenizers (ctest scripts, fixture generators, corpus preparation):
# made once per folder, shared by every caller that names the same folder, and holding only what
# its callers asked for (corpus preparation gets pyarrow and tokenizers, no torch).
#
# Usage: bash scripts/python_env.sh VENV [SPEC...]
#   Makes VENV hold every SPEC (pip requirements, e.g. "transformers==5.24.0"; "torch" means the
#   torch pinned below) and writes VENV/bin/hwpy, the venv's python with the CUDA toolkit's
#   libraries on the loader path: run Python through it. Tests call it through python_reference
#   (scripts/references.sh), which also holds the use lock below while their Python runs.
# Exit status: 0 ready; 77 the package index cannot be reached (a skip; in CI mode,
# HEADWISE_REQUIRE_REFERENCES=1, a failure: scripts/references.sh); 1 anything else (pip cannot
# resolve or install, no python3-venv, a wait past HEADWISE_VENV_WAIT_S), one `error:` line.
#
# torch: PyPI's Linux wheel pulls about 5 GB of CUDA libraries (cuBLAS, cuDNN, ...) that a CPU
# check never calls; on a machine with the CUDA toolkit in /usr/local/cuda (this project's kind)
# torch comes without them and finds the toolkit's copies instead, plus the four the toolkit
# lacks (NCCL of torch's version, cuSPARSELt, NVSHMEM, cuFile): about 1 GB. Elsewhere torch comes
# with its full dependencies.
#
# Installs only add packages: pip resolves the missing SPECs against what is installed
# (--dry-run --report), then installs exactly its choice with --no-deps. Two locks, both waited
# for at most HEADWISE_VENV_WAIT_S seconds (default 900), after which the caller fails naming
# the wait: VENV.install.lock (one installer at a time; shared while a caller checks the venv)
# and VENV.lock (held shared by every caller whose Python runs; an install that would replace an
# installed version takes it exclusively, so that no package changes under a running check).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/references.sh"
[ $# -ge 1 ] || { echo "error: usage: python_env.sh VENV [SPEC...]" >&2; exit 1; }
# hwpy names the venv's python by this path: make it absolute, or hwpy works only from here.
VENV=$(realpath -m "$1")
shift
TORCH=torch==2.15.0
# torch 2.15.0's CUDA dependencies that /usr/local/cuda 13.0 lacks or has in an older version.
TORCH_EXTRA=(nvidia-nccl-cu13==2.30.7 nvidia-cusparselt-cu13==0.8.1 nvidia-nvshmem-cu13==3.7.2 nvidia-cufile==1.20.0.107)
CUDA_LIB=/usr/local/cuda/lib64
WAIT_S=$(venv_wait_s)
LOG=$VENV.pip.log

fail() { echo "error: python_env: $*" >&2; exit 1; }
[[ "$WAIT_S" =~ ^[0-9]+$ ]] || fail "HEADWISE_VENV_WAIT_S='$WAIT_S' is not a number of seconds"
SPECS=()
for s in "$@"; do
  if [ "$s" = torch ]; then SPECS+=("$TORCH"); else SPECS+=("$s"); fi
done
lean_torch() { [ -e "$CUDA_LIB/libcudart.so.13" ] && [ -e "$CUDA_LIB/libcudnn.so.9" ]; }

# The SPECs the venv does not satisfy, one a line (all of them when there is no venv yet).
missing_specs() {
  if [ ! -x "$VENV/bin/python" ] || [ ! -x "$VENV/bin/hwpy" ]; then
    printf '%s\n' "${SPECS[@]}"
    return
  fi
  "$VENV/bin/python" - "${SPECS[@]}" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version
from pip._vendor.packaging.requirements import Requirement
for spec in sys.argv[1:]:
    r = Requirement(spec)
    try:
        ok = r.specifier.contains(version(r.name), prereleases=True)
    except PackageNotFoundError:
        ok = False
    if not ok:
        print(spec)
PY
}

# The package index pip would use, and whether it answers (any HTTP status does). Prints the
# reason when it does not; status 2 when pip is told to use no index (its own error then).
INDEX_URL=""
index_unreachable_reason() {
  case "${PIP_NO_INDEX:-}" in 1|[Tt]rue|[Yy]es|[Oo]n) return 2 ;; esac
  python3 - "$INDEX_URL" <<'PY'
import sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(sys.argv[1].rstrip("/") + "/pip/", timeout=20).close()
except urllib.error.HTTPError:
    sys.exit(1)  # it answered
except Exception as e:  # refused, unresolvable, timed out, TLS
    print(getattr(e, "reason", None) or e)
    sys.exit(0)
sys.exit(1)
PY
}
# Called before anything is downloaded: a skip (77) when the index cannot be reached.
need_index() {
  local why
  INDEX_URL=${PIP_INDEX_URL:-$(python3 -m pip config get global.index-url 2>/dev/null || true)}
  INDEX_URL=${INDEX_URL:-https://pypi.org/simple}
  why=$(index_unreachable_reason) || return 0
  reference_unavailable "python_env: the package index $INDEX_URL cannot be reached ($why): cannot install ${MISSING[*]} into $VENV"
}
# pip failed ($1: what it did): the index went away (a skip), else pip's own last error line.
pip_failed() {
  need_index
  fail "pip could not $1: $(grep -E '^(ERROR|error):' "$LOG" | tail -n 1 | cut -c1-300) (whole log: $LOG)"
}
pip_q() { "$VENV/bin/pip" install --disable-pip-version-check "$@" >>"$LOG" 2>&1; }

mkdir -p "$(dirname "$VENV")" || fail "cannot create $(dirname "$VENV")"
exec 9>>"$VENV.install.lock" || fail "cannot open $VENV.install.lock"
: >>"$VENV.lock" || fail "cannot create $VENV.lock"
flock -s -w "$WAIT_S" 9 || fail "another job has been installing into $VENV for over $WAIT_S s (HEADWISE_VENV_WAIT_S)"
mapfile -t MISSING < <(missing_specs)
[ ${#MISSING[@]} = 0 ] && exit 0
flock -x -w "$WAIT_S" 9 || fail "another job has been installing into $VENV for over $WAIT_S s (HEADWISE_VENV_WAIT_S)"
mapfile -t MISSING < <(missing_specs)  # again: the job waited for may have installed them
[ ${#MISSING[@]} = 0 ] && exit 0
need_index
echo "python_env: installing ${MISSING[*]} into $VENV" >&2
: >"$LOG"

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV" >>"$LOG" 2>&1 || fail "python3 -m venv $VENV failed (python3-venv missing?): $(tail -n 1 "$LOG")"
  pip_q --quiet --upgrade pip || pip_failed "upgrade pip in the new venv"
fi
cat >"$VENV/bin/hwpy" <<EOF
#!/bin/sh
# The venv's python with the CUDA toolkit's libraries on the loader path (scripts/python_env.sh).
LD_LIBRARY_PATH="$CUDA_LIB\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$VENV/bin/python" "\$@"
EOF
chmod +x "$VENV/bin/hwpy"

# What pip would install for the missing SPECs given what is there (torch pinned even when it
# comes as another package's dependency).
echo "$TORCH" >"$VENV.constraints.txt"
pip_q --quiet --dry-run --report "$VENV.report.json" -c "$VENV.constraints.txt" "${MISSING[@]}" ||
  pip_failed "resolve ${MISSING[*]}"
lean=0
lean_torch && lean=1
mapfile -t CHOSEN < <("$VENV/bin/python" - "$VENV.report.json" "$lean" <<'PY'
import json, re, sys
lean = sys.argv[2] == "1"
for item in json.load(open(sys.argv[1]))["install"]:
    meta = item["metadata"]
    if lean and re.fullmatch(r"(triton|nvidia-.*|cuda-.*)", meta["name"].lower()):
        continue  # torch's CUDA libraries: the toolkit's, plus TORCH_EXTRA
    print(f"{meta['name']}=={meta['version']}")
PY
)
if [ "$lean" = 1 ] && printf '%s\n' "${CHOSEN[@]}" | grep -qi '^torch=='; then CHOSEN+=("${TORCH_EXTRA[@]}"); fi
# A chosen package installed at another version would change under a running check: wait until
# none runs (VENV.lock exclusively).
mapfile -t REPLACED < <("$VENV/bin/python" - "${CHOSEN[@]}" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    try:
        have = version(name)
    except PackageNotFoundError:
        continue
    if have != want:
        print(f"{name} {have} -> {want}")
PY
)
if [ ${#REPLACED[@]} -gt 0 ]; then
  echo "python_env: replacing ${REPLACED[*]} in $VENV" >&2
  exec 8>>"$VENV.lock"
  flock -x -w "$WAIT_S" 8 || fail "installing ${MISSING[*]} replaces ${REPLACED[*]}, and checks have been using $VENV for over $WAIT_S s (HEADWISE_VENV_WAIT_S)"
fi
[ ${#CHOSEN[@]} = 0 ] || pip_q --quiet --no-deps "${CHOSEN[@]}" || pip_failed "install ${CHOSEN[*]}"
mapfile -t STILL < <(missing_specs)
[ ${#STILL[@]} = 0 ] || fail "pip installed ${CHOSEN[*]}, yet $VENV still lacks ${STILL[*]} (see $LOG)"
for s in "${SPECS[@]}"; do
  if [ "$s" = "$TORCH" ]; then
    "$VENV/bin/hwpy" -c "import torch" >>"$LOG" 2>&1 || fail "torch does not import in $VENV: $(tail -n 1 "$LOG")"
  fi
done
exit 0
