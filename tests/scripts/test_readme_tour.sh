#!/usr/bin/env bash
# ctest docs:tour: runs every command of the README's "Five-minute tour" fenced block, shortened:
# training runs take 6 updates (AAH's controller warms up for 2), the reproduction script gets
# --smoke. Any other change to a command is a failure of the tour, not of this test, so the
# rewrites stay few and are listed here. The tour runs in a scratch folder laid out like a checkout
# (configs/ and scripts/ linked from the source tree, build/headwise the binary under test), so
# its data/kjv and runs/ land there and nothing is written into the source tree. Without the
# tour's corpus (Debian's bible-kjv): a skip (77).
# Usage: test_readme_tour.sh SOURCE_DIR HEADWISE_BINARY
set -euo pipefail
SRC=$(cd "$1" && pwd)
BIN=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
command -v bible >/dev/null || { echo "SKIP: docs:tour: 'bible' (Debian's bible-kjv, the tour's corpus) is not installed"; exit 77; }
W=$(mktemp -d "${TMPDIR:-/tmp}/headwise_tour_XXXXXX")
trap 'rm -rf "$W"' EXIT
ln -s "$SRC/configs" "$W/configs"
ln -s "$SRC/scripts" "$W/scripts"
mkdir "$W/build"
ln -s "$BIN" "$W/build/headwise"
had_data=$([ -e "$SRC/data/kjv" ] && echo 1 || echo 0)

# The tour's block: the first ```sh fence after the "## Five-minute tour" heading.
awk '/^## Five-minute tour/{t=1} t&&/^```sh/{f=1;next} f&&/^```/{exit} f' "$SRC/README.md" >"$W/tour.sh"
n=$(grep -c 'headwise\|reproduce' "$W/tour.sh" || true)
[ "$n" -ge 8 ] || { echo "FAIL: found only $n commands in the README's tour"; exit 1; }

sed -e 's#step_300#step_6#g' \
    -e 's#\(train --config configs/default_cpu.json.*\)$#\1 --set train.steps=6 --set train.eval_every=3#' \
    -e 's#\(train --config configs/aah_cpu.json.*\)$#\1 --set train.steps=6 --set train.eval_every=3 --set method.warmup_steps=2 --set method.control_every=2#' \
    -e 's#\(--max-new\) 64#\1 8#' \
    -e 's#\(--scale cpu\)#\1 --smoke#' \
    "$W/tour.sh" >"$W/tour_smoke.sh"
echo "--- the tour as run (smoke), in $W:"; cat "$W/tour_smoke.sh"
cd "$W"
export HEADWISE_BIN="$BIN" OMP_WAIT_POLICY=passive
{ bash scripts/prepare_default_corpus.sh build/headwise data/kjv && bash -euo pipefail tour_smoke.sh; } >log 2>&1 ||
  { tail -30 log; echo "FAIL: the tour stopped"; exit 1; }
for f in data/kjv/train_000000.bin runs/default/checkpoints/step_6 runs/tour/aoh runs/tour/saf runs/tour/oal \
         runs/tour/aah/summary.json runs/tour/curves.png runs/tour/reproduce-aoh/REPORT.md; do
  [ -e "$W/$f" ] || { tail -30 log; echo "FAIL: the tour did not write $f"; exit 1; }
done
if [ "$had_data" = 0 ] && [ -e "$SRC/data/kjv" ] && [ -n "$(find "$SRC/data/kjv" -newer "$W/tour.sh" -print -quit)" ]; then
  echo "FAIL: the tour wrote into the source tree ($SRC/data/kjv)"; exit 1
fi
[ ! -e "$SRC/runs/tour" ] || [ -z "$(find "$SRC/runs/tour" -newer "$W/tour.sh" -print -quit)" ] ||
  { echo "FAIL: the tour wrote into the source tree ($SRC/runs/tour)"; exit 1; }
# A second time, the tour's training runs report their finished runs (issue 52): exit 0, "is
# complete", their checkpoints byte for byte unchanged.
grep ' train ' "$W/tour_smoke.sh" >"$W/trains.sh"
[ "$(wc -l <"$W/trains.sh")" -ge 2 ] || { echo "FAIL: expected the tour's two train commands"; exit 1; }
sums() { find "$W/runs/default/checkpoints" "$W/runs/tour/aah/checkpoints" -type f -print0 | sort -z | xargs -0 md5sum; }
before=$(sums)
bash -euo pipefail "$W/trains.sh" >"$W/again.log" 2>&1 || { tail -30 "$W/again.log"; echo "FAIL: a tour train command failed the second time"; exit 1; }
[ "$(grep -c ' is complete: ' "$W/again.log")" = 2 ] || { cat "$W/again.log"; echo "FAIL: the second tour did not report both finished runs"; exit 1; }
[ "$(sums)" = "$before" ] || { echo "FAIL: the second tour changed a checkpoint"; exit 1; }
echo "docs:tour: all $n commands ran; a second time its training runs reported their finished runs"
