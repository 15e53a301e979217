#!/usr/bin/env bash
# Corpus preparation (scripts/data/prepare_corpus.py: FineWeb-Edu parquet, WikiText-2/103 raw or
# parquet, JSONL -> llm.c token shards) in the project's Python environment: makes or reuses
# VENV (HEADWISE_VENV, default build/pyvenv) with pyarrow and tokenizers through
# scripts/python_env.sh, then runs the script with every argument given here.
#
#   scripts/data/prepare_corpus.sh --tokenizer TOK.json --out DIR --input FILE... [options]
#
# Exit 77 when the package index cannot be reached to install them (scripts/python_env.sh).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv=${HEADWISE_VENV:-build/pyvenv}
. "$here/../references.sh"
python_reference "$venv" "pyarrow==26.0.1" "tokenizers==0.23.3" >&2  # holds the venv's use lock while Python runs
exec "$PY" "$here/prepare_corpus.py" "$@"
