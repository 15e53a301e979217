#!/usr/bin/env bash
# Builds the embedded default corpus: the King James Bible (public domain, package bible-kjv,
# ~4.4 MB, one verse per line as "Ge1:1 In the beginning ...") as byte-level token shards.
# Usage: bash scripts/prepare_default_corpus.sh [path/to/headwise] [output-dir]
#        (defaults: build/headwise, data/kjv). Does nothing if the shards already exist.
set -euo pipefail
HEADWISE=${1:-build/headwise}
OUT=${2:-data/kjv}

if [ -f "$OUT/train_000000.bin" ] && [ -f "$OUT/val_000000.bin" ]; then
  echo "prepare_default_corpus: $OUT already holds shards, skipping"
  exit 0
fi
command -v bible >/dev/null || { echo "prepare_default_corpus: 'bible' not found (apt-get install bible-kjv)" >&2; exit 1; }
[ -x "$HEADWISE" ] || { echo "prepare_default_corpus: headwise binary '$HEADWISE' not found or not executable" >&2; exit 1; }
if [ -e "$OUT" ] && [ -n "$(ls -A "$OUT")" ]; then
  echo "prepare_default_corpus: $OUT exists without shards but is not empty; remove it first" >&2
  exit 1
fi

# Work in a sibling temp dir and move it into place at the end, so an interrupted run never
# leaves a half-prepared $OUT that a later run would take as done.
mkdir -p "$(dirname "$OUT")"
TMP=$(mktemp -d "${OUT%/}.tmp.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
# bible's line width (-l) defaults to $COLUMNS: unset it so the text never depends on the terminal.
env -u COLUMNS bible -f Gen1:1-Rev22:21 >"$TMP/kjv.txt"
[ -s "$TMP/kjv.txt" ] || { echo "prepare_default_corpus: 'bible' printed nothing" >&2; exit 1; }
"$HEADWISE" prepare --input "$TMP/kjv.txt" --output "$TMP/shards"
if [ -d "$OUT" ]; then rmdir "$OUT"; fi  # empty (checked above)
mv "$TMP/shards" "$OUT"
echo "prepare_default_corpus: wrote $OUT"
