#!/usr/bin/env bash
# scripts/data/prepare_corpus.py on small parquet / JSONL / WikiText corpora generated here, the
# ids checked against the `tokenizers` package (prepare_corpus_check.py). The Python packages come
# from the shared venv (scripts/python_env.sh adds pyarrow and tokenizers, no torch); a skip (77)
# only when the package index cannot be reached, a failure in CI mode (scripts/references.sh).
# Usage: test_prepare_corpus.sh path/to/headwise VENV
set -euo pipefail
HEADWISE=$1
VENV=$2
SRC=$(cd "$(dirname "$0")/../.." && pwd)
. "$SRC/scripts/references.sh"
python_reference "$VENV" "pyarrow==26.0.1" "tokenizers==0.23.3"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$PY" "$SRC/tests/scripts/prepare_corpus_check.py" "$SRC/scripts/data/prepare_corpus.py" \
  "$SRC/tests/fixtures/tokenizers/gpt2_style.json" "$TMP" "$HEADWISE"
