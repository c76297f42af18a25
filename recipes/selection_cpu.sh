#!/usr/bin/env bash
# The best-of-K selection experiment on CPU (issue 39): the gold-trace SFT policy on every family,
# the base model on causal_graph, G = 32, K = 1..32. Pools are sampled once into
# recipes/results/selection/pools (frozen, committed) and reused; a run stops sampling after
# BUDGET_MINUTES in all and the next run continues where it stopped. Results (JSON, Markdown):
# $OUT, then `python -m faithgrpo.eval.selection.page` writes recipes/results/selection_cpu.md.
#
#   bash recipes/selection_cpu.sh                              # everything, resumable
#   BUDGET_MINUTES=120 FAMILIES="causal_graph clear" bash recipes/selection_cpu.sh
#   OFFLINE=1 bash recipes/selection_cpu.sh                    # re-score the stored pools, no model
#
# CLEAR is read from $CLEAR (its data/json_single folder; never committed): every one of its 204
# find-one-valid records that converts to a CALVER question. The SFT policy is the
# adapter in recipes/results/selection/sft_adapter (recipes/configs/sft_selection_cpu.yaml).
set -euo pipefail
PYTHON=${PYTHON:-$([[ -x .venv/bin/python ]] && echo .venv/bin/python || echo python)}  # make setup's venv
OUT=${OUT:-recipes/results/selection}
POOLS=${POOLS:-recipes/results/selection/pools}
ADAPTER=${ADAPTER:-recipes/results/selection/sft_adapter}
SFT_CONFIG=${SFT_CONFIG:-recipes/configs/sft_selection_cpu.yaml}
CLEAR=${CLEAR:-}  # CLEAR's data/json_single folder; the clear family is skipped without it
FAMILIES=${FAMILIES:-causal_graph clear causal_story causal_bn causal_bn_story base:causal_graph}
BUDGET_MINUTES=${BUDGET_MINUTES:-600}
THREADS=${THREADS:-2}  # torch threads while sampling (recorded with each pool)
BATCH_QUESTIONS=${BATCH_QUESTIONS:-1}  # questions per decode call, and rows decoded together:
SLOTS=${SLOTS:-32}                     # provenance, not part of a pool's key (benchmarks/bench_pools.py)
deadline=$(( $(date +%s) + BUDGET_MINUTES * 60 ))

tokens_for() {  # the generation budget of a family: ~2x its longest gold trace
  case "$1" in
    causal_graph|causal_story) echo 320 ;;
    clear) echo 448 ;;
    *) echo 512 ;;
  esac
}

for entry in $FAMILIES; do
  policy=sft; family=$entry
  if [[ "$entry" == base:* ]]; then policy=base; family=${entry#base:}; fi
  args=(--family "$family" --policy "$policy" --pools "$POOLS" --out "$OUT" --sft-config "$SFT_CONFIG"
        --samples 32 --k 1,2,4,8,16,32 --max-new-tokens "$(tokens_for "$family")" --seed 0 --threads "$THREADS"
        --batch-questions "$BATCH_QUESTIONS" --slots "$SLOTS")
  if [[ "$policy" == sft ]]; then args+=(--adapter "$ADAPTER"); fi
  if [[ "$family" == clear ]]; then
    if [[ -z "$CLEAR" ]]; then echo "[selection] clear skipped: set CLEAR=<CLEAR's data/json_single folder>"; continue; fi
    args+=(--clear "$CLEAR" --questions 204)
  else
    args+=(--questions 64)
  fi
  if [[ -n "${OFFLINE:-}" ]]; then
    args+=(--offline)
  else
    left=$(( (deadline - $(date +%s)) / 60 ))
    if (( left < 1 )); then echo "[selection] budget spent before $entry"; continue; fi
    args+=(--budget-minutes "$left")
  fi
  echo "[selection] $(date -u +%H:%M:%S) $entry"
  "$PYTHON" -m faithgrpo.cli select "${args[@]}"
done
"$PYTHON" -m faithgrpo.eval.selection.page "$OUT" --notes recipes/results/selection_notes.md \
  --out recipes/results/selection_cpu.md
