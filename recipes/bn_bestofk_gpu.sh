#!/usr/bin/env bash
# Best-of-K on the published Bayesian networks (causal_bn, issue 29) on one GPU: the sibling of
# clear_bestofk_gpu.sh for faithgrpo's own task. Every query kind each network admits, edge list and
# story renderings, 32 six-slot traces per question; CALVER vs plurality vs confidence vs random
# selection, graded by the graph predicate (any valid answer) and by exact match, plus
# CoT-Pass@K with CALVER's six checks and (JUDGE=...) an LLM judge. Outputs report.{json,md} and
# PNGs in $OUT.
#
#   bash recipes/bn_bestofk_gpu.sh
#   MODEL=Qwen/Qwen2.5-3B-Instruct ADAPTER=runs/grpo_qwen/final bash recipes/bn_bestofk_gpu.sh
#   NETWORKS='["asia","alarm","andes"]' PROMPTS=64 bash recipes/bn_bestofk_gpu.sh --overwrite
#
# Traces on the largest networks are long (andes: a gold trace is ~13,000 characters, its GRAPH
# alone 7,300), hence 8,192 new tokens; with NETWORKS limited to small ones 2,048 suffice
# (MAX_NEW_TOKENS=2048). BACKEND=vllm uses vLLM when installed (pip install 'faithgrpo[vllm]');
# extra flags are passed on to `faithgrpo eval`. The sampling settings are ours.
set -euo pipefail
MODEL=${MODEL:-Qwen/Qwen2.5-1.5B-Instruct}
OUT=${OUT:-runs/bn_bestofk_$(basename "$MODEL")}
NETWORKS=${NETWORKS:-}
TASK_CONFIG='{"causal_bn": {}}'
if [[ -n "$NETWORKS" ]]; then TASK_CONFIG="{\"causal_bn\": {\"networks\": $NETWORKS}}"; fi
EXTRA=()
if [[ -n "${ADAPTER:-}" ]]; then EXTRA+=(--adapter "$ADAPTER"); fi
if [[ -n "${JUDGE:-}" ]]; then EXTRA+=(--judge "$JUDGE" --judge-backend "${BACKEND:-transformers}"); fi
exec "${PYTHON:-python}" -m faithgrpo.cli eval \
  --model "$MODEL" "${EXTRA[@]}" \
  --tasks causal_bn --task-config "$TASK_CONFIG" \
  --prompts "${PROMPTS:-128}" --samples 32 --k 1,2,4,8,16,32 --best-of-k-subsets 16 \
  --hints none --faithfulness-pairs 0 \
  --temperature 0.7 --top-p 0.95 --max-new-tokens "${MAX_NEW_TOKENS:-8192}" --batch-size 32 \
  --backend "${BACKEND:-transformers}" --seed 0 \
  --out "$OUT" "$@"
