# Shared by scripts/reproduce/<paper>.sh (sourced): options, the binary, the machine.
#   --scale cpu|gpu|cluster (default cpu), --out DIR (default runs/reproduce/<paper>-<scale>)
#   --smoke: the cpu protocol shrunk to a tiny model and a few steps (under 2 minutes), for CI:
#   every table, CSV, PNG and claim line is written, the numbers mean nothing. Scripts read SMOKE=1.
# HEADWISE_BIN names the binary; otherwise build/headwise is built by scripts/setup.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
SCALE=cpu
SMOKE=0
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --scale) SCALE=${2:-}; shift 2 ;;
    --out) OUT=${2:-}; shift 2 ;;
    --smoke) SMOKE=1; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed 's/^# \{0,1\}//' | head -n -1; exit 0 ;;
    *) echo "error: unknown option '$1' (use --scale cpu|gpu|cluster, --out DIR, --smoke)" >&2; exit 1 ;;
  esac
done
case "$SCALE" in cpu|gpu|cluster) ;; *) echo "error: --scale must be cpu, gpu or cluster, got '$SCALE'" >&2; exit 1 ;; esac
if [ "$SMOKE" = 1 ] && [ "$SCALE" != cpu ]; then
  echo "error: --smoke shrinks the cpu protocol; it cannot be combined with --scale $SCALE" >&2; exit 1
fi
OUT=${OUT:-runs/reproduce/${PAPER}-$([ "$SMOKE" = 1 ] && echo smoke || echo "$SCALE")}
mkdir -p "$OUT"
if [ -n "${HEADWISE_BIN:-}" ]; then
  HW=$HEADWISE_BIN
  [ -x "$HW" ] || { echo "error: HEADWISE_BIN=$HW is not an executable" >&2; exit 1; }
else
  HW=build/headwise
  [ -x "$HW" ] || HEADWISE_BUILD_TARGET=headwise bash scripts/setup.sh build
fi
START_S=$(date +%s)
MACHINE="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), \
$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)$( (command -v nvidia-smi >/dev/null && \
nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | sed 's/^/, GPU /') || true)"
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
COMMANDS=()
run() {  # run CMD...: log it for the report, run it
  COMMANDS+=("$*")
  echo "reproduce[$PAPER]: $*" >&2
  "$@"
}
[ -e data/kjv/train_000000.bin ] || run bash scripts/prepare_default_corpus.sh "$HW" data/kjv
