#!/usr/bin/env bash
# Data-parallel training end to end: the real `headwise train` as 1 process and as 2 MPI ranks
# on a tiny config (tiny.json), losses compared step by step with compare_losses.py.
#
#   run_dist_train_tests.sh HEADWISE MPIEXEC [core|saf]
#
# core (default):
#   - 2 ranks equal 1 rank with twice the gradient accumulation bit for bit: the same gradient
#     norms and final checkpoints byte for byte (the micro-step sum is one fixed tree, see
#     include/headwise/train/micro_step_sum.hpp); the logged losses, double means summed in
#     another order, within 1e-12
#   - ZeRO-1 on 2 ranks equals the plain all-reduce (1e-5), its checkpoints hold one optimizer
#     shard per rank, and each rank's AdamW holds about half the floats (memory log lines)
#   - resuming on 2 ranks (plain and ZeRO-1) equals the uninterrupted run exactly, final
#     checkpoints byte for byte
#   - a 1-rank checkpoint resumes on 2 ZeRO-1 ranks; a ZeRO-1 checkpoint on 1 rank is refused
#   - the comparison itself rejects a loss off by 2e-5
#   - 2 ranks equal 1 rank in bf16 mixed precision too, bit for bit
#   - the same for a Llama-family model (qwen3's choices), and with model dropout on
# saf: the same through an SAF intervention at step 6 (1 rank, 2 ranks, 2 ranks with ZeRO-1: the
#   same head plan and losses within 1e-5; after the plan change each ZeRO-1 rank holds only its
#   new shard; resume after the intervention on 2 ZeRO-1 ranks equals the uninterrupted run exactly).
# signals: one run folder per job under mpirun (docs/distributed.md): a second 2-rank job on the
#   folder of a running one ends with one error line (rank 0's) naming the holder; SIGUSR1 to one
#   rank stops both ranks after the same update with one checkpoint, exit 75; `--resume auto` on 2 ranks then ends as the uninterrupted 1-rank run
#   (losses within 1e-12, final weights byte for byte).
#
# Needs python3 (standard library only). Keeps its temporary folder when a check fails (KEEP=1: always).
set -euo pipefail

[ $# -ge 2 ] && [ $# -le 3 ] || { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
headwise=$1
mpiexec=$2
part=${3:-core}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ -x "$headwise" ] || { echo "FAIL: headwise binary $headwise is not executable" >&2; exit 1; }
case "$part" in core|saf|signals) ;; *) echo "FAIL: unknown part '$part' (core, saf or signals)" >&2; exit 2 ;; esac

work=$(mktemp -d /tmp/hw_dist_train.XXXXXX)
ok=0
trap '[ "$ok" = 1 ] && [ -z "${KEEP:-}" ] && rm -rf "$work" || echo "kept $work for inspection" >&2' EXIT
export OMP_NUM_THREADS=1

die() { echo "FAIL: $*" >&2; exit 1; }
say() { echo "dist_train: $*"; }

# run NAME COMMAND...: the command's output goes to NAME.log, shown when it fails.
run() {
  local name=$1
  shift
  if ! "$@" > "$work/$name.log" 2>&1; then
    tail -n 40 "$work/$name.log" >&2
    die "$name failed: $*"
  fi
}
one() { "$headwise" "$@"; }
np2() { "$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$headwise" "$@"; }
compare() { python3 "$here/compare_losses.py" "$@"; }

# --- data: a deterministic text, byte-tokenised by `headwise prepare` --------------------------
python3 "$here/make_corpus.py" "$work/corpus.txt"
run prepare one prepare --input "$work/corpus.txt" --output "$work/data" --val-fraction 0.1
common=(--config "$here/tiny.json" --set "data.train=$work/data/train_*.bin" --set "data.val=$work/data/val_*.bin")
steps=20

# check_ckpt DIR WORLD ZERO1: trainer.json and the optimizer files of a checkpoint; no DIR.tmp left.
check_ckpt() {
  local dir=$1 world=$2 zero1=$3
  [ -f "$dir/model.safetensors" ] && [ -f "$dir/trainer.json" ] || die "$dir: model.safetensors or trainer.json missing"
  [ ! -e "$dir.tmp" ] || die "$dir.tmp was left behind"
  python3 - "$dir/trainer.json" "$world" "$zero1" <<'EOF' || die "$dir/trainer.json: unexpected world/zero1"
import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(0 if j.get("world") == int(sys.argv[2]) and j.get("zero1") == (sys.argv[3] == "true") else 1)
EOF
  if [ "$zero1" = true ]; then
    [ ! -e "$dir/optimizer.safetensors" ] || die "$dir: a ZeRO-1 checkpoint should hold no full optimizer.safetensors"
    for r in $(seq 0 $((world - 1))); do
      [ -f "$dir/optimizer.rank$r.safetensors" ] || die "$dir: optimizer.rank$r.safetensors missing"
    done
  else
    [ -f "$dir/optimizer.safetensors" ] || die "$dir: optimizer.safetensors missing"
    ! ls "$dir"/optimizer.rank*.safetensors >/dev/null 2>&1 || die "$dir: unexpected per-rank optimizer files"
  fi
}

# zero1_memory LOG COUNT [PLAIN_LOG]: ZeRO-1 saves memory. LOG (2 ranks with ZeRO-1) holds COUNT
# 'optimizer:' lines (start of run, then one per plan change); in each, every rank's AdamW holds
# its shard only (rank 0 about half the floats, 4 bytes per float per moment plus at most 64
# bytes of arena padding per moment; no rank more than half the full moments plus padding) and
# the shards cover the block exactly once. PLAIN_LOG (2 ranks without ZeRO-1): each rank holds
# both moments for the whole block.
zero1_memory() {
  python3 - "$@" <<'EOF' || die "ZeRO-1 AdamW memory per rank is not a shard (see the 'optimizer:' lines of $1)"
import re, sys
text = open(sys.argv[1]).read()
zero1 = [tuple(int(x) for x in m.groups()) for m in re.finditer(
    r"optimizer: (\d+) AdamW bytes on rank 0, at most (\d+) per rank \(ZeRO-1: shard of (\d+) floats on rank 0, "
    r"the (\d+) shards cover (\d+) of (\d+) parameter-block floats\)", text)]
assert len(zero1) == int(sys.argv[2]), zero1
for line in zero1:
    b0, bmax, s0, world, covered, n = line
    assert world == 2 and covered == n, line  # the shards cover the block exactly once
    assert abs(s0 - n / 2) <= 1, line  # about half the floats on rank 0
    assert 2 * 4 * s0 <= b0 <= 2 * (4 * s0 + 64), line
    assert bmax <= 4 * n + 2 * 64, line  # no rank holds more than half the full moments
if len(sys.argv) > 3:
    plain = [tuple(int(x) for x in m.groups()) for m in re.finditer(
        r"optimizer: (\d+) AdamW bytes per rank \(all (\d+) parameter-block floats on each of (\d+) ranks\)",
        open(sys.argv[3]).read())]
    assert len(plain) == 1 and plain[0][1:] == (zero1[0][5], 2), (plain, zero1)
    assert plain[0][0] == 2 * 4 * plain[0][1], plain
    print("dist_train: AdamW bytes per rank: %d without ZeRO-1, at most %d with" % (plain[0][0], zero1[0][1]))
EOF
}

# same_files A B NAMES...: byte-identical checkpoint files.
same_files() {
  local a=$1 b=$2
  shift 2
  for f in "$@"; do cmp -s "$a/$f" "$b/$f" || die "$a/$f and $b/$f differ"; done
}

if [ "$part" = core ]; then
  # Bitwise, on any CPU: rank r sums micro-batches [r*a, (r+1)*a) in the same tree as the first
  # or second half of the 1-rank update, and 2 ranks add the halves as s0 + s1. The logged loss
  # is a double mean whose terms are added in another order (1 rank: ((l0+l1)+l2)+l3; 2 ranks:
  # (l0+l1)/2 + (l2+l3)/2), so it is exact only to a few double ulps of ~4: 1e-12 is 10^3 of them.
  run ref one train "${common[@]}" --out "$work/ref"
  run np2 np2 train "${common[@]}" --out "$work/np2"
  compare "$work/np2/metrics.jsonl" "$work/ref/metrics.jsonl" --tol 1e-12 --steps $steps
  compare "$work/np2/metrics.jsonl" "$work/ref/metrics.jsonl" --tol 1e-12 --key val_loss
  compare "$work/np2/metrics.jsonl" "$work/ref/metrics.jsonl" --tol 0 --key grad_norm
  same_files "$work/np2/checkpoints/step_20" "$work/ref/checkpoints/step_20" model.safetensors optimizer.safetensors
  check_ckpt "$work/ref/checkpoints/step_10" 1 false
  check_ckpt "$work/np2/checkpoints/step_20" 2 false
  say "2 ranks equal 1 rank with twice the accumulation, bit for bit"

  # LoRA with a frozen base and adapters on layer 1 only (layer 0 has no gradient at all, an
  # empty bucket) and dropout (masks drawn by micro-batch index, so each rank draws the 1-rank
  # run's masks for its micro-batches): the same bitwise equality, adapters included.
  lora=(--set model.lora.rank=2 --set 'model.lora.layers=[1]' --set model.lora.freeze_base=true
        --set model.lora.dropout=0.1)
  run lora_ref one train "${common[@]}" "${lora[@]}" --out "$work/lora_ref"
  run lora_np2 np2 train "${common[@]}" "${lora[@]}" --out "$work/lora_np2"
  compare "$work/lora_np2/metrics.jsonl" "$work/lora_ref/metrics.jsonl" --tol 1e-12 --steps $steps
  compare "$work/lora_np2/metrics.jsonl" "$work/lora_ref/metrics.jsonl" --tol 0 --key grad_norm
  same_files "$work/lora_np2/checkpoints/step_20" "$work/lora_ref/checkpoints/step_20" model.safetensors \
    adapter_model.safetensors optimizer.safetensors
  run lora_zero1 np2 train "${common[@]}" "${lora[@]}" --out "$work/lora_z" --set train.zero1=true
  compare "$work/lora_z/metrics.jsonl" "$work/lora_ref/metrics.jsonl" --tol 1e-5 --steps $steps
  say "LoRA (frozen base, one adapted layer, dropout): 2 ranks equal 1 rank bit for bit; ZeRO-1 within 1e-5"

  # The Llama family (Qwen3's choices: RMSNorm, SwiGLU, RoPE, q/k norm; GQA, untied head): the
  # same bitwise equality.
  llama=(--set model.family=qwen3 --set model.pos=rope --set model.n_kv_head=2 --set model.tie_word_embeddings=false)
  run llama_ref one train "${common[@]}" "${llama[@]}" --out "$work/llama_ref"
  run llama_np2 np2 train "${common[@]}" "${llama[@]}" --out "$work/llama_np2"
  compare "$work/llama_np2/metrics.jsonl" "$work/llama_ref/metrics.jsonl" --tol 1e-12 --steps $steps
  compare "$work/llama_np2/metrics.jsonl" "$work/llama_ref/metrics.jsonl" --tol 0 --key grad_norm
  same_files "$work/llama_np2/checkpoints/step_20" "$work/llama_ref/checkpoints/step_20" model.safetensors \
    optimizer.safetensors
  say "Llama family (qwen3 choices): 2 ranks equal 1 rank bit for bit"

  # Model dropout (resid_pdrop, embd_pdrop): the masks follow the global micro-batch index, so 2
  # ranks draw the 1-rank run's masks: the same bitwise equality, and the losses differ from the
  # run without dropout (the masks are on).
  drop=(--set model.resid_pdrop=0.2 --set model.embd_pdrop=0.1)
  run drop_ref one train "${common[@]}" "${drop[@]}" --out "$work/drop_ref"
  run drop_np2 np2 train "${common[@]}" "${drop[@]}" --out "$work/drop_np2"
  compare "$work/drop_np2/metrics.jsonl" "$work/drop_ref/metrics.jsonl" --tol 1e-12 --steps $steps
  compare "$work/drop_np2/metrics.jsonl" "$work/drop_ref/metrics.jsonl" --tol 0 --key grad_norm
  same_files "$work/drop_np2/checkpoints/step_20" "$work/drop_ref/checkpoints/step_20" model.safetensors \
    optimizer.safetensors
  if compare "$work/drop_ref/metrics.jsonl" "$work/ref/metrics.jsonl" --tol 1e-6 --steps $steps >/dev/null 2>&1; then
    die "dropout 0.2/0.1 left every loss as without dropout"
  fi
  say "dropout: 2 ranks equal 1 rank bit for bit"

  # ZeRO-1 squares the gradient shard by shard for the clip norm (another double sum, ~1e-16
  # apart), which can move the float clip coefficient by an ulp: equal within rounding, and a
  # one-ulp change of every update's step size moves these losses by far less than 1e-5.
  run zero1 np2 train "${common[@]}" --out "$work/z" --set train.zero1=true
  compare "$work/z/metrics.jsonl" "$work/np2/metrics.jsonl" --tol 1e-5 --steps $steps
  compare "$work/z/metrics.jsonl" "$work/ref/metrics.jsonl" --tol 1e-5 --steps $steps
  # AdamW hardly notices a consistently wrong clip scale; the logged global norm does.
  compare "$work/z/metrics.jsonl" "$work/np2/metrics.jsonl" --tol 1e-5 --key grad_norm
  check_ckpt "$work/z/checkpoints/step_10" 2 true
  check_ckpt "$work/z/checkpoints/step_20" 2 true
  say "ZeRO-1 equals the plain all-reduce"
  zero1_memory "$work/zero1.log" 1 "$work/np2.log"

  run resume_zero1 np2 train "${common[@]}" --out "$work/zr" --set train.zero1=true \
    --resume "$work/z/checkpoints/step_10"
  compare "$work/zr/metrics.jsonl" "$work/z/metrics.jsonl" --tol 0 --steps $steps --from-step 10
  same_files "$work/zr/checkpoints/step_20" "$work/z/checkpoints/step_20" \
    model.safetensors optimizer.rank0.safetensors optimizer.rank1.safetensors
  run resume_np2 np2 train "${common[@]}" --out "$work/pr" --resume "$work/np2/checkpoints/step_10"
  compare "$work/pr/metrics.jsonl" "$work/np2/metrics.jsonl" --tol 0 --steps $steps --from-step 10
  same_files "$work/pr/checkpoints/step_20" "$work/np2/checkpoints/step_20" model.safetensors optimizer.safetensors
  say "resume on 2 ranks equals the uninterrupted run (plain and ZeRO-1)"

  run resume_1to2 np2 train "${common[@]}" --out "$work/x" --set train.zero1=true \
    --resume "$work/ref/checkpoints/step_10"
  compare "$work/x/metrics.jsonl" "$work/ref/metrics.jsonl" --tol 1e-5 --steps $steps --from-step 10
  if one train "${common[@]}" --out "$work/bad" --set train.zero1=true \
      --resume "$work/z/checkpoints/step_10" > "$work/bad.log" 2>&1; then
    die "a ZeRO-1 checkpoint of 2 ranks resumed on 1 rank"
  fi
  grep -q "sharded over 2 ranks" "$work/bad.log" || { cat "$work/bad.log" >&2; die "unclear error for a world mismatch"; }
  say "a 1-rank checkpoint resumes on 2 ZeRO-1 ranks; a 2-rank ZeRO-1 checkpoint on 1 rank is refused"

  # The comparison must be able to fail: a reference off by 2e-5 at one step.
  python3 - "$work/ref/metrics.jsonl" "$work/ref_off.jsonl" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for rec in lines:
    if rec.get("step") == 7 and "loss" in rec:
        rec["loss"] += 2e-5
open(sys.argv[2], "w").write("".join(json.dumps(r) + "\n" for r in lines))
EOF
  if compare "$work/np2/metrics.jsonl" "$work/ref_off.jsonl" --tol 1e-5 --steps $steps > /dev/null 2>&1; then
    die "compare_losses.py accepted a reference off by 2e-5"
  fi
  say "the comparison rejects a loss off by 2e-5"

  # bf16 mixed precision: the per-rank micro-batches are the 1-rank run's micro-steps, and the
  # gradients the ranks add are fp32 and summed in the same tree, so 2 ranks equal 1 rank bit
  # for bit here too. (Before the tree, 1 rank let OpenBLAS accumulate micro-steps inside its
  # GEMMs: a last-bit difference that bf16's rounding of the weights turned into 2.5e-4 of loss
  # by step 17 on AVX2 machines.)
  run ref_bf16 one train "${common[@]}" --out "$work/ref16" --set train.precision=bf16
  run np2_bf16 np2 train "${common[@]}" --out "$work/np216" --set train.precision=bf16
  compare "$work/np216/metrics.jsonl" "$work/ref16/metrics.jsonl" --tol 1e-12 --steps $steps
  compare "$work/np216/metrics.jsonl" "$work/ref16/metrics.jsonl" --tol 0 --key grad_norm
  same_files "$work/np216/checkpoints/step_20" "$work/ref16/checkpoints/step_20" model.safetensors optimizer.safetensors
  say "in bf16 too, bit for bit"
fi

if [ "$part" = saf ]; then
  saf=(--set method.name=saf --set method.at_step=6 --set method.ratio=0.5 --set method.calib_seqs=8
       --set method.fit_steps=20)
  run saf_ref one train "${common[@]}" "${saf[@]}" --out "$work/saf_ref"
  run saf_np2 np2 train "${common[@]}" "${saf[@]}" --out "$work/saf_np2"
  run saf_zero1 np2 train "${common[@]}" "${saf[@]}" --out "$work/saf_z" --set train.zero1=true
  for d in saf_ref saf_np2 saf_z; do [ -f "$work/$d/interventions/step_6.0.saf.json" ] || die "$d: no interventions/step_6.0.saf.json"; done
  python3 - "$work"/saf_{ref,np2,z}/interventions/step_6.0.saf.json <<'EOF' \
    || die "the ranks' runs installed different head plans"
import json, sys
plans = [json.load(open(p))["head_plan"] for p in sys.argv[1:]]
sys.exit(0 if all(p == plans[0] for p in plans) else 1)
EOF
  compare "$work/saf_np2/metrics.jsonl" "$work/saf_ref/metrics.jsonl" --tol 1e-5 --steps $steps
  compare "$work/saf_z/metrics.jsonl" "$work/saf_ref/metrics.jsonl" --tol 1e-5 --steps $steps
  zero1_memory "$work/saf_zero1.log" 2  # the plan change keeps only the new layout's shard
  say "an SAF intervention on 2 ranks (plain and ZeRO-1) equals 1 rank"
  run saf_resume np2 train "${common[@]}" "${saf[@]}" --out "$work/saf_zr" --set train.zero1=true \
    --resume "$work/saf_z/checkpoints/step_10"
  compare "$work/saf_zr/metrics.jsonl" "$work/saf_z/metrics.jsonl" --tol 0 --steps $steps --from-step 10
  say "resume after the intervention on 2 ZeRO-1 ranks equals the uninterrupted run"
fi

if [ "$part" = signals ]; then
  long=(--set train.steps=300 --set train.eval_every=100 --set train.checkpoint_every=1000 --set train.log_every=100)
  updates() { local n; n=$(grep -c '"loss"' "$1" 2>/dev/null); echo "${n:-0}"; }
  run sig_ref one train "${common[@]}" "${long[@]}" --out "$work/sig_ref"
  # (mpirun itself in the background, not a function: the signal must reach mpirun)
  "$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$headwise" train "${common[@]}" "${long[@]}" --out "$work/sig" \
    > "$work/sig_job.log" 2>&1 &
  job=$!
  for _ in $(seq 600); do [ "$(updates "$work/sig/metrics.jsonl")" -ge 20 ] && break; sleep 0.1; done
  [ "$(updates "$work/sig/metrics.jsonl")" -ge 20 ] || die "the 2-rank job did not reach update 20"
  # Its ranks (mpirun's children) are paused meanwhile, so it is surely still running, however
  # slow the second job's start.
  ranks=$(pgrep -P "$job" | tr '\n' ' ')
  [ -n "$ranks" ] || die "no rank processes under mpirun $job"
  kill -STOP $ranks
  # A second job on the same folder: refused by its rank 0, the others quiet.
  if np2 train "${common[@]}" "${long[@]}" --out "$work/sig" > "$work/sig_second.log" 2>&1; then
    kill -CONT $ranks
    die "a second 2-rank job ran in the folder of a running one"
  fi
  # SIGUSR1 to one rank only (a signal may reach some ranks only, or at other moments): both must
  # still stop after the same update, as they agree on it over the communicator.
  kill -USR1 "${ranks%% *}"
  kill -CONT $ranks
  [ "$(grep -c '^error: ' "$work/sig_second.log")" = 1 ] || { cat "$work/sig_second.log" >&2; die "the second job: not one error line"; }
  grep -q "^error: '$work/sig' is in use by another headwise process (train, pid " "$work/sig_second.log" \
    || { cat "$work/sig_second.log" >&2; die "the second job's error does not name the folder and its holder"; }
  # Ranks that disagree on the stop would hang in a collective: a minute at most, then a failure.
  for _ in $(seq 600); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$job" 2>/dev/null; then
    kill -KILL $ranks "$job" 2>/dev/null || true
    tail -n 30 "$work/sig_job.log" >&2
    die "the job still ran 60 s after SIGUSR1 reached one rank (did the ranks disagree on the stop?)"
  fi
  set +e
  wait "$job"
  rc=$?
  set -e
  [ "$rc" = 75 ] || { tail -n 30 "$work/sig_job.log" >&2; die "SIGUSR1 to mpirun: exit $rc, not 75"; }
  n=$(updates "$work/sig/metrics.jsonl")
  [ "$n" -lt 300 ] || die "the job was not stopped before its end"
  grep -q "stopped by SIGUSR1 after update $n: checkpoint $work/sig/checkpoints/step_$n; exit status 75" "$work/sig_job.log" \
    || { tail -n 30 "$work/sig_job.log" >&2; die "no 'stopped by SIGUSR1 after update $n' line"; }
  [ "$(grep -c 'SIGUSR1: stopping after this update' "$work/sig_job.log")" = 1 ] || die "expected one rank to take the signal"
  check_ckpt "$work/sig/checkpoints/step_$n" 2 false
  run sig_resume np2 train "${common[@]}" "${long[@]}" --out "$work/sig" --resume auto
  compare "$work/sig/metrics.jsonl" "$work/sig_ref/metrics.jsonl" --tol 1e-12 --steps 300
  same_files "$work/sig/checkpoints/step_300" "$work/sig_ref/checkpoints/step_300" model.safetensors optimizer.safetensors
  say "a second job on a running job's folder is refused; SIGUSR1 to one rank stops both at update $n with a checkpoint (exit 75); resumed on 2 ranks it ends as the uninterrupted run"
fi

ok=1
say "PASS ($part)"
