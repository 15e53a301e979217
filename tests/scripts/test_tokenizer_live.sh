#!/usr/bin/env bash
# The BPE tokenizer against the `tokenizers` package, live, on the whole embedded corpus (the
# KJV text of scripts/prepare_default_corpus.sh) for the three fixtures, through `headwise prepare`
# with 2 threads. `tokenizers` comes from the shared venv (scripts/python_env.sh); without it or
# without the corpus package (bible-kjv): a skip (77), a failure in CI mode (scripts/references.sh).
# Usage: test_tokenizer_live.sh path/to/headwise VENV
set -euo pipefail
HEADWISE=$1
VENV=$2
SRC=$(cd "$(dirname "$0")/../.." && pwd)
. "$SRC/scripts/references.sh"
command -v bible >/dev/null || reference_unavailable "tokenizer_live: 'bible' (Debian's bible-kjv, the corpus) is not installed"
python_reference "$VENV" "tokenizers==0.23.3"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
env -u COLUMNS bible -f Gen1:1-Rev22:21 >"$TMP/kjv.txt"
for style in gpt2 llama3 qwen2; do
  TOK="$SRC/tests/fixtures/tokenizers/${style}_style.json"
  "$HEADWISE" prepare --input "$TMP/kjv.txt" --output "$TMP/$style" --tokenizer "$TOK" --threads 2 \
    --val-fraction 0.01
  "$PY" "$SRC/tests/scripts/tokenizer_live_check.py" "$TMP/kjv.txt" "$TOK" "$TMP/$style"
done
