#!/usr/bin/env bash
# scripts/python_env.sh and scripts/references.sh, offline (ctest scripts:python_env):
#   - a package index that cannot be reached: a skip (77) with one line naming the index and what
#     could not be installed, before any venv is made; in CI mode (HEADWISE_REQUIRE_REFERENCES=1)
#     a failure with one `error:` line; python_reference passes either on to its caller;
#   - a venv that already holds what is asked for needs no index;
#   - an index that answers but lacks the package: a failure naming pip's error, never a skip;
#   - another job's install lock held past HEADWISE_VENV_WAIT_S: a failure naming the wait;
#   - bad usage: a failure.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
ENV_SH=$SRC/scripts/python_env.sh
W=$(mktemp -d "${TMPDIR:-/tmp}/python_env_test.XXXXXX")
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
unset HEADWISE_REQUIRE_REFERENCES PIP_NO_INDEX
# run OUTVAR RCVAR CMD...: CMD's output (stdout and stderr) and exit status.
run() {
  local -n _out=$1 _rc=$2
  shift 2
  _out=$("$@" 2>&1)
  _rc=$?
}
one_line() {  # one_line WHAT OUT PREFIX NEEDLE
  [ "$(printf '%s\n' "$2" | wc -l)" = 1 ] || fail "$1: not one line: $2"
  [[ "$2" == "$3"* ]] || fail "$1: does not start with '$3': $2"
  [[ "$2" == *"$4"* ]] || fail "$1: does not name '$4': $2"
  echo "ok: $1: $2"
}

closed=http://127.0.0.1:$(free_port)/simple
run out rc env PIP_INDEX_URL="$closed" bash "$ENV_SH" "$W/v" "pyarrow==26.0.1"
[ "$rc" = 77 ] || fail "unreachable index: exit $rc, not 77: $out"
one_line "unreachable index" "$out" "SKIP: python_env: the package index $closed cannot be reached" "cannot install pyarrow==26.0.1"
[ ! -e "$W/v" ] || fail "a venv was made although nothing could be installed"
run out rc env PIP_INDEX_URL="$closed" HEADWISE_REQUIRE_REFERENCES=1 bash "$ENV_SH" "$W/v" "pyarrow==26.0.1"
[ "$rc" = 1 ] || fail "unreachable index in CI mode: exit $rc, not 1: $out"
one_line "unreachable index, CI mode" "$out" "error: python_env: the package index $closed cannot be reached" \
  "HEADWISE_REQUIRE_REFERENCES=1"
caller='. "$1/scripts/references.sh"; python_reference "$2" "pyarrow==26.0.1"; echo "went on"'
run out rc env PIP_INDEX_URL="$closed" bash -c "$caller" _ "$SRC" "$W/v"
[ "$rc" = 77 ] && [[ "$out" != *"went on"* ]] || fail "python_reference did not stop its caller with 77 (exit $rc): $out"
run out rc env PIP_INDEX_URL="$closed" HEADWISE_REQUIRE_REFERENCES=1 bash -c "$caller" _ "$SRC" "$W/v"
[ "$rc" = 1 ] && [[ "$out" != *"went on"* ]] || fail "python_reference in CI mode: exit $rc, not 1: $out"
echo "ok: python_reference stops its caller with 77, or 1 in CI mode"

# A venv that holds what is asked for (pip itself) needs no index.
python3 -m venv "$W/ready" >/dev/null 2>&1 || fail "python3 -m venv failed"
printf '#!/bin/sh\nexec "%s/ready/bin/python" "$@"\n' "$W" >"$W/ready/bin/hwpy"
chmod +x "$W/ready/bin/hwpy"
run out rc env PIP_INDEX_URL="$closed" HEADWISE_REQUIRE_REFERENCES=1 bash "$ENV_SH" "$W/ready" pip
[ "$rc" = 0 ] && [ -z "$out" ] || fail "a ready venv: exit $rc: $out"
echo "ok: a venv that holds the packages asked for needs no index"

# An index that answers (an empty one) but has no such package: pip's error, exit 1, not a skip.
mkdir -p "$W/index/simple"
port=$(free_port)
(cd "$W/index" && exec python3 -m http.server "$port" --bind 127.0.0.1) >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 50); do python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/simple/')" 2>/dev/null && break; sleep 0.1; done
run out rc env PIP_INDEX_URL="http://127.0.0.1:$port/simple" PIP_FIND_LINKS= bash "$ENV_SH" "$W/ready" "pyarrow==26.0.1"
[ "$rc" = 1 ] || fail "pip's failure with a reachable index: exit $rc, not 1: $out"
err=$(grep '^error:' <<<"$out")
one_line "pip cannot find the package" "$err" "error: python_env: pip could not resolve pyarrow==26.0.1" "pyarrow"

# Another job holds the install lock: a failure after HEADWISE_VENV_WAIT_S, naming it.
(exec 7>>"$W/ready.install.lock" && flock -x 7 && exec sleep 60) &
pids+=($!)
sleep 0.3
start=$SECONDS
run out rc env HEADWISE_VENV_WAIT_S=1 bash "$ENV_SH" "$W/ready" pip
[ "$rc" = 1 ] && [ $((SECONDS - start)) -le 10 ] || fail "a held install lock: exit $rc after $((SECONDS - start)) s: $out"
one_line "a held install lock" "$out" "error: python_env: another job has been installing into $W/ready for over 1 s" \
  "HEADWISE_VENV_WAIT_S"

run out rc bash "$ENV_SH"
[ "$rc" = 1 ] || fail "no arguments: exit $rc, not 1: $out"
run out rc env HEADWISE_VENV_WAIT_S=soon bash "$ENV_SH" "$W/ready" pip
[ "$rc" = 1 ] || fail "HEADWISE_VENV_WAIT_S=soon: exit $rc, not 1: $out"
one_line "a bad HEADWISE_VENV_WAIT_S" "$out" "error: python_env:" "HEADWISE_VENV_WAIT_S='soon'"
echo "python_env: all checks passed"
