#!/usr/bin/env bash
# SAF's causal-prefill study (Appendix D.3): prefill latency of a checkpoint whose heads SAF
# replaced (25% and 50% static heads) against ordinary attention (every head softmax) on the same
# weights, median of repeated timed prefills after warm-up, at each length T.
#   bash scripts/reproduce/saf_prefill.sh [--scale cpu] [--out DIR] [--smoke]
# The paper: the 124M 16K RoPE checkpoints, batch 64, T = 512 .. 16K; 25%: 1.092-1.116x, 50%:
# 1.200-1.244x (at batch 1, T 4096: 0.969x and 0.972x). No per-token decoding.
# cpu: `headwise bench-infer` (the CPU decoder's causal prefill, batch 1: it has no batch option)
#   on CKPT_25 and CKPT_50 (default: saf.sh's cpu run, runs/reproduce/saf-cpu/tokens/seed_1337/
#   saf_{25,50}/final), at T in CONTEXTS (default: 64 128 256, up to the checkpoint's context),
#   PREFILL_RUNS timed prefills (default 10) after 3 warm-ups.
# --smoke: trains two 2 x 2 x 32 SAF checkpoints (4 updates, 25% = 1 head, 50% = 2 heads) and
#   times T 16 and 32 with 5 runs: every file is written, the numbers mean nothing (for CI).
# gpu|cluster: one error. The paper's setting (batch 64 on the GPU) needs a timed CUDA prefill benchmark that
#   headwise does not have (bench-infer and the decoder run on the CPU only; `headwise eval --device
#   cuda` runs a batched causal forward but neither times it nor switches the plan to all-softmax;
#   the CUDA backend is not grown until it has run on a GPU).
# Writes OUT/prefill.{md,csv}, OUT/bench/<ratio>_T<T>.json (bench-infer's JSON line per run) and
# OUT/REPORT.md.
PAPER=saf_prefill
source "$(dirname "$0")/common.sh" "$@"
if [ "$SCALE" != cpu ]; then
  echo "error: saf_prefill.sh --scale $SCALE: the paper's causal prefill (batch 64 on the GPU) needs a timed CUDA prefill benchmark, which headwise does not have (bench-infer times the CPU decoder only, at batch 1); use --scale cpu" >&2
  exit 1
fi
RUNS=${PREFILL_RUNS:-10}
if [ "$SMOKE" = 1 ]; then
  CONTEXTS="16 32"; RUNS=5
  # the cpu Table 2 config without its experiment section (headwise train reads a run config)
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d.pop('experiment'); json.dump(d, open(sys.argv[2], 'w'))" \
    configs/saf_cpu_table2.json "$OUT/smoke_config.json"
  for r in 25 50; do
    ck=$OUT/train_$r/checkpoints/step_4
    [ -e "$ck/config.json" ] && continue
    "$HW" train --config "$OUT/smoke_config.json" --out "$OUT/train_$r" --resume auto \
      --set model.n_layer=2 --set model.n_head=2 --set model.n_embd=32 --set model.block_size=32 \
      --set train.seq_len=32 --set train.micro_batch=2 --set train.total_batch_tokens=64 --set train.steps=4 \
      --set train.warmup_steps=1 --set train.eval_batches=2 --set train.log_every=1 --set method.name=saf \
      --set method.ratio=0.$r --set method.calib_seqs=4 --set method.fit_steps=10 > "$OUT/train_$r.log" 2>&1 \
      || { echo "error: the smoke checkpoint ($r%) failed to train; its log: $OUT/train_$r.log" >&2; exit 1; }
  done
  CKPT_25=$OUT/train_25/checkpoints/step_4
  CKPT_50=$OUT/train_50/checkpoints/step_4
  NOTE="SMOKE RUN (numbers meaningless): 2 x 2 x 32 checkpoints after 4 updates, T 16 and 32, batch 1, $RUNS runs"
else
  CONTEXTS=${CONTEXTS:-"64 128 256"}
  CKPT_25=${CKPT_25:-runs/reproduce/saf-cpu/tokens/seed_1337/saf_25/final}
  CKPT_50=${CKPT_50:-runs/reproduce/saf-cpu/tokens/seed_1337/saf_50/final}
  NOTE="CPU decoder, batch 1 (paper: batch 64 on an H100-class GPU), T $CONTEXTS (paper: 512-16K), $RUNS timed prefills"
fi
for r in 25 50; do
  ck_var=CKPT_$r
  [ -e "${!ck_var}/config.json" ] || {
    echo "error: $ck_var=${!ck_var}: not a checkpoint (no config.json); run scripts/reproduce/saf.sh first or set $ck_var" >&2
    exit 1
  }
done
mkdir -p "$OUT/bench"
for r in 25 50; do
  ck_var=CKPT_$r
  for t in $CONTEXTS; do
    f=$OUT/bench/${r}_T$t.json
    [ -s "$f" ] && continue
    run "$HW" bench-infer --checkpoint "${!ck_var}" --context "$t" --prefill-warmup 3 --prefill-runs "$RUNS" \
      --decode-warmup 0 --decode-runs 1 > "$OUT/bench/${r}_T$t.log" 2>&1 \
      || { echo "error: bench-infer of $ck_var at T $t failed; its log: $OUT/bench/${r}_T$t.log" >&2; exit 1; }
    tail -n 1 "$OUT/bench/${r}_T$t.log" > "$f.tmp" && mv "$f.tmp" "$f"
  done
done
printf '%s\n' "${COMMANDS[@]}" > "$OUT/commands.txt"
python3 - "$OUT" "$NOTE" "$MACHINE" $CONTEXTS <<'PY'
import json, sys
out, note, machine, contexts = sys.argv[1], sys.argv[2], sys.argv[3], [int(t) for t in sys.argv[4:]]
paper = {25: "1.092-1.116x", 50: "1.200-1.244x"}
rows = []
for r in (25, 50):
    for t in contexts:
        j = json.load(open(f"{out}/bench/{r}_T{t}.json"))
        saf, ordinary = j["plan"]["prefill_median_ms"], j["all_softmax"]["prefill_median_ms"]
        # speedup of the SAF plan: ordinary attention's median prefill time over SAF's
        rows.append([t, f"{r}%", 1, f"{saf:.3f}", f"{ordinary:.3f}", f"{ordinary / saf:.3f}x", paper[r]])
cols = ["T", "Static heads", "Batch", "SAF median prefill ms", "Ordinary median prefill ms", "Prefill speedup",
        "Paper (batch 64, T 512-16K)"]
md = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n" + "".join(
    "| " + " | ".join(str(c) for c in row) + " |\n" for row in rows)
open(f"{out}/prefill.md", "w").write(md)
open(f"{out}/prefill.csv", "w").write(",".join(cols) + "\n" + "".join(",".join(str(c) for c in row) + "\n" for row in rows))
open(f"{out}/REPORT.md", "w").write(
    "# SAF causal prefill (Appendix D.3)\n\n" + note + "; machine: " + machine + ".\n\n"
    "Same weights, the checkpoint's plan against every head softmax; median of the timed prefills.\n\n" + md)
PY
echo "reproduce[saf_prefill]: $OUT/REPORT.md"
