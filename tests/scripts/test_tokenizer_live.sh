#!/usr/bin/env bash
# The BPE tokenizer against the `tokenizers` package, live, on the whole embedded corpus (the
# KJV text of scripts/prepare_default_corpus.sh) for the three fixtures, through `headwise prepare`
# with 2 threads. Installs `tokenizers` with pip when missing; exits 77 (ctest: skipped) when it
# cannot, or when the corpus package (bible-kjv) is not installed.
# Usage: test_tokenizer_live.sh path/to/headwise
set -euo pipefail
HEADWISE=$1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
if ! python3 -c "import tokenizers" 2>/dev/null; then
  python3 -m pip install --user --quiet tokenizers >/dev/null 2>&1 || { echo "SKIP: cannot pip install tokenizers"; exit 77; }
  python3 -c "import tokenizers" 2>/dev/null || { echo "SKIP: tokenizers not importable"; exit 77; }
fi
command -v bible >/dev/null || { echo "SKIP: 'bible' (bible-kjv) not installed"; exit 77; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
env -u COLUMNS bible -f Gen1:1-Rev22:21 >"$TMP/kjv.txt"
for style in gpt2 llama3 qwen2; do
  TOK="$SRC/tests/fixtures/tokenizers/${style}_style.json"
  "$HEADWISE" prepare --input "$TMP/kjv.txt" --output "$TMP/$style" --tokenizer "$TOK" --threads 2 \
    --val-fraction 0.01
  python3 "$SRC/tests/scripts/tokenizer_live_check.py" "$TMP/kjv.txt" "$TOK" "$TMP/$style"
done
