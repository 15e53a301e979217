#!/usr/bin/env bash
# SAF's intervention cost at the paper's 124M shape and T = 4096 on the CPU (issue 20 item 6):
# configs/saf_124m_4k_learned.json in fp32 on the CPU with micro-batch 1 and N calibration
# sequences (default 2, the fewest the variance allows) from the KJV shards, SAF 25% at update 0;
# the run is stopped as soon as the intervention report is written (the update after it is not
# the point). Prints the report's timings: capture (its forwards and the host's attention with
# its moments), fit, and the whole intervention.
# Usage: bash scripts/saf_calib_cost_cpu.sh [N] [memory_budget_mb]   (defaults 2, 4096)
# Environment (reduced shapes and the A/B comparison, scripts/saf_capture_ab_cpu.sh):
#   CAPTURE=backend|reference (method.capture, default backend), SEQ (T, default 4096),
#   LAYERS (model.n_layer, default the config's 12), FIT_STEPS (method.fit_steps, default the config's).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-2}
BUDGET=${2:-4096}
BUILD=${BUILD:-build}
CAPTURE=${CAPTURE:-backend}
SEQ=${SEQ:-4096}
extra=()
[ -n "${LAYERS:-}" ] && extra+=(--set "model.n_layer=$LAYERS")
[ -n "${FIT_STEPS:-}" ] && extra+=(--set "method.fit_steps=$FIT_STEPS")
DATA=${DATA:-data/kjv}
[ -x "$BUILD/headwise" ] || bash scripts/setup.sh "$BUILD"
[ -e "$DATA/train_000000.bin" ] || bash scripts/prepare_default_corpus.sh "$BUILD/headwise" "$DATA"
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
OUT=$(mktemp -d "${TMPDIR:-/tmp}/saf_calib_cost.XXXXXX")
# `train` reads a run config: the file's "experiment" section stays out.
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); d.pop("experiment", None); json.dump(d, open(sys.argv[2], "w"))' \
  configs/saf_124m_4k_learned.json "$OUT/config.json"
"$BUILD/headwise" train --config "$OUT/config.json" --out "$OUT/run" \
  --set train.device=cpu --set train.precision=fp32 --set train.micro_batch=1 \
  --set train.seq_len="$SEQ" --set train.total_batch_tokens="$SEQ" --set train.steps=1 --set train.eval_every=0 \
  --set train.checkpoint_every=0 --set "data.train=$DATA/train_*.bin" --set "data.val=" \
  --set data.val_split=none --set "data.calib=$DATA/train_*.bin" --set method.at_step=0 \
  --set method.calib_seqs="$N"  --set method.memory_budget_mb="$BUDGET" \
  --set method.capture="$CAPTURE" ${extra[@]+"${extra[@]}"} > "$OUT/log.txt" 2>&1 &
pid=$!
report="$OUT/run/interventions/step_0.0.saf.json"
while kill -0 "$pid" 2>/dev/null && [ ! -s "$report" ]; do sleep 2; done
kill "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
[ -s "$report" ] || { echo "saf_calib_cost_cpu: no intervention report; log:" >&2; tail -5 "$OUT/log.txt" >&2; exit 1; }
python3 - "$report" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
keys = ["capture", "calib_seqs", "calib_seq_len", "calibration_replays", "layers_per_group", "fits", "capture_seconds",
        "capture_forward_seconds", "capture_host_seconds", "fit_seconds"]
print(json.dumps({k: r.get(k) for k in keys}))
PY
rm -rf "$OUT"
