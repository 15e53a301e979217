#!/usr/bin/env bash
# Greedy cached decoding, headwise `generate` vs Hugging Face transformers `generate` (PyTorch
# eager, KV cache), on the same all-softmax checkpoint with the same thread count (issue 17's
# client comparison): prompt of PROMPT tokens (default 512), NEW new tokens (default 256).
# Prints both implementations' prefill ms, decode ms/token and decode tokens/s, the ratio, and
# whether both produced the same tokens (exit 1 when they differ).
# Usage: bash scripts/bench_generate_vs_transformers.sh [OUT=runs/bench_generate] [CKPT]
#   CKPT: a learned-position checkpoint with block_size >= PROMPT + NEW (default: train
#   configs/default_cpu.json at block_size 1024 for 100 updates on the embedded corpus, ~2 min).
# Environment: HEADWISE_BIN (default build/headwise), THREADS (default 1), ROUNDS (default 3,
#   alternating headwise and transformers), BENCH_VENV (default ~/.cache/headwise/bench-venv):
#   torch + transformers from PyPI go into that virtual environment (created when missing), so
#   they never shadow the system Python's packages.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/bench_generate}
CKPT=${2:-}
HW=${HEADWISE_BIN:-build/headwise}
VENV=${BENCH_VENV:-$HOME/.cache/headwise/bench-venv}
PY="$VENV/bin/python"
THREADS=${THREADS:-1}
ROUNDS=${ROUNDS:-3}
PROMPT=${PROMPT:-512}
NEW=${NEW:-256}
[ -x "$HW" ] || bash scripts/setup.sh build
if ! "$PY" -c "import torch, transformers" 2>/dev/null; then
  echo "bench: installing torch + transformers into $VENV ..." >&2
  python3 -m venv "$VENV"
  "$PY" -m pip install --quiet torch transformers safetensors
fi
mkdir -p "$OUT"
if [ -z "$CKPT" ]; then
  [ -e data/kjv/train_000000.bin ] || bash scripts/prepare_default_corpus.sh "$HW" data/kjv
  if [ ! -d "$OUT/lm/checkpoints/step_100" ]; then
    echo "bench: training the comparison model (block_size 1024, 100 updates) ..." >&2
    "$HW" train --config configs/default_cpu.json --out "$OUT/lm" --set model.block_size=1024 \
      --set train.steps=100 --set train.eval_every=0 > "$OUT/train.log"
  fi
  CKPT="$OUT/lm/checkpoints/step_100"
fi
# The prompt: the first PROMPT tokens of the validation shard (a byte-level corpus, so the
# model's own distribution), as ids.
"$PY" - "$PROMPT" "$OUT/prompt.txt" <<'PYEOF'
import glob, sys
n, out = int(sys.argv[1]), sys.argv[2]
data = open(sorted(glob.glob("data/kjv/val_*.bin"))[0], "rb").read()
import struct
header = struct.unpack("<256i", data[:1024])
toks = struct.unpack(f"<{n}H", data[1024:1024 + 2 * n])
open(out, "w").write(" ".join(map(str, toks)) + "\n")
PYEOF
export OMP_WAIT_POLICY=passive
for r in $(seq "$ROUNDS"); do
  OMP_NUM_THREADS=$THREADS "$HW" generate --checkpoint "$CKPT" --prompt-tokens "$OUT/prompt.txt" --max-new "$NEW" \
    --temperature 0 > "$OUT/hw_tokens_$r.bin" 2> "$OUT/hw_$r.json"
  OMP_NUM_THREADS=$THREADS "$PY" scripts/bench_hf_generate.py --checkpoint "$CKPT" --prompt-tokens "$OUT/prompt.txt" \
    --max-new "$NEW" --threads "$THREADS" --runs 1 > "$OUT/hf_$r.json"
  echo "round $r done" >&2
done
"$PY" - "$OUT" "$ROUNDS" "$THREADS" "$NEW" <<'PYEOF'
import json, statistics, sys
out, rounds, threads, new = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
hw = [json.loads(open(f"{out}/hw_{r}.json").read().strip().splitlines()[-1]) for r in range(1, rounds + 1)]
hf = [json.loads(open(f"{out}/hf_{r}.json").read().strip().splitlines()[-1]) for r in range(1, rounds + 1)]
# headwise prints a byte-level checkpoint's tokens as bytes, then one newline.
hw_tok = list(open(f"{out}/hw_tokens_1.bin", "rb").read()[:-1])
same = hw_tok == hf[0]["tokens"]
med = lambda xs: statistics.median(xs)
hw_pre, hf_pre = med([x["prefill_ms"] for x in hw]), med([x["prefill_ms"] for x in hf])
hw_dec, hf_dec = med([x["decode_ms_per_token"] for x in hw]), med([x["decode_ms_per_token"] for x in hf])
print(f"| impl | threads | prefill ms | decode ms/token | decode tok/s |\n|---|---:|---:|---:|---:|")
print(f"| headwise | {threads} | {hw_pre:.1f} | {hw_dec:.3f} | {1e3 / hw_dec:.0f} |")
print(f"| transformers {hf[0]['torch']} | {threads} | {hf_pre:.1f} | {hf_dec:.3f} | {1e3 / hf_dec:.0f} |")
print(f"decode tokens/s ratio headwise/transformers: {hf_dec / hw_dec:.2f} (median of {rounds} alternating rounds)")
print(f"prefill ratio transformers/headwise: {hf_pre / hw_pre:.2f}")
print(f"same {new} greedy tokens: {'yes' if same else 'NO'}")
if not same:
    first = next(i for i, (a, b) in enumerate(zip(hw_tok, hf[0]['tokens'])) if a != b) if hw_tok and hf[0]['tokens'] else 0
    print(f"first difference at new token {first}", file=sys.stderr)
    sys.exit(1)
PYEOF
