#!/usr/bin/env bash
# scripts/data/prepare_corpus.py on small parquet / JSONL / WikiText corpora generated here, the
# ids checked against the `tokenizers` package (prepare_corpus_check.py). The Python packages come
# from the shared venv (scripts/python_env.sh adds pyarrow and tokenizers); exit 77 (ctest:
# skipped) where they cannot be installed.
# Usage: test_prepare_corpus.sh path/to/headwise VENV
set -euo pipefail
HEADWISE=$1
VENV=$2
SRC=$(cd "$(dirname "$0")/../.." && pwd)
bash "$SRC/scripts/python_env.sh" "$VENV" "pyarrow==26.0.1" "tokenizers==0.23.3" || exit $?
exec 8<"$(realpath -m "$VENV").lock" && flock -s 8  # held to the end: no concurrent install swaps packages under this test (python_env.sh)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$VENV/bin/hwpy" "$SRC/tests/scripts/prepare_corpus_check.py" "$SRC/scripts/data/prepare_corpus.py" \
  "$SRC/tests/fixtures/tokenizers/gpt2_style.json" "$TMP" "$HEADWISE"
