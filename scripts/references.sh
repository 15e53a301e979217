# Sourced by every check against an independent reference that a machine may lack: the Python
# cross-checks (PyTorch, transformers, PEFT, lm-evaluation-harness, tokenizers: a venv from PyPI
# through scripts/python_env.sh), the sanitizer build and the fuzz targets (clang, libFuzzer:
# tests/scripts/sanitize.sh). One rule for all of them, here:
#   - a reference that cannot run here is a skip (exit 77, ctest: "Skipped") with its cause printed;
#   - in CI mode, HEADWISE_REQUIRE_REFERENCES=1 (.ci/run sets it), it is a failure: one `error:`
#     line naming the cause, exit 1. CI can then never pass with a reference check skipped.
# A check that runs and finds a bug fails either way; so does a bug of the check's own set-up.

# reference_unavailable CAUSE...: the reference cannot run here. Exits 77, or 1 in CI mode.
reference_unavailable() {
  if [ "${HEADWISE_REQUIRE_REFERENCES:-0}" = 1 ]; then
    echo "error: $* (HEADWISE_REQUIRE_REFERENCES=1: a reference check that cannot run is a failure)" >&2
    exit 1
  fi
  echo "SKIP: $*" >&2
  exit 77
}

# How long a job waits for another's install into a shared venv before it fails saying so.
venv_wait_s() { echo "${HEADWISE_VENV_WAIT_S:-900}"; }

# python_reference VENV SPEC...: makes VENV hold SPEC... (scripts/python_env.sh: "torch" is its
# pinned CPU-lean torch) or exits as it says (77: the package index cannot be reached, outside CI
# mode; 1: anything else), then holds VENV's use lock shared on fd 8 until this shell exits, so
# that no install replaces a package under this check's Python. Sets PY to VENV/bin/hwpy.
python_reference() {
  local venv=$1 rc=0
  bash "$(dirname "${BASH_SOURCE[0]}")/python_env.sh" "$@" || rc=$?
  [ "$rc" = 0 ] || exit "$rc"
  venv=$(realpath -m "$venv")
  exec 8>>"$venv.lock"
  local wait_s
  wait_s=$(venv_wait_s)
  flock -s -w "$wait_s" 8 || {
    echo "error: python_env: $venv is being changed by another job for over $wait_s s (HEADWISE_VENV_WAIT_S)" >&2
    exit 1
  }
  PY=$venv/bin/hwpy
}
