#!/usr/bin/env bash
# SAF calibration capture, reference (host float64) against backend (fp32 softmax tiles) on the
# CPU, alternating A-B-A-B in fresh processes so that a shared machine's load drifts over both
# (issue 20 item 6). Each run is scripts/saf_calib_cost_cpu.sh at a reduced shape; the fits are
# cut to FIT_STEPS (they are not what is compared). Prints one JSON line per run and the load.
# Usage: bash scripts/saf_capture_ab_cpu.sh [N] [pairs]   (defaults 2 sequences, 2 pairs)
#   SEQ (default 1024), LAYERS (default 12), FIT_STEPS (default 1) pass through.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-2}
PAIRS=${2:-2}
export SEQ=${SEQ:-1024} LAYERS=${LAYERS:-12} FIT_STEPS=${FIT_STEPS:-1}
echo "shape: $LAYERS layers x 12 heads x 768, T = $SEQ, $N sequences; uptime: $(uptime)"
for ((p = 0; p < PAIRS; ++p)); do
  for c in reference backend; do
    CAPTURE=$c bash scripts/saf_calib_cost_cpu.sh "$N"
  done
done
echo "uptime after: $(uptime)"
