#!/usr/bin/env bash
# The CALVER paper's CLEAR best-of-K experiment in its full setting (K up to 32) on one GPU:
# find-one-valid backdoor / frontdoor adjustment-set and d-separation questions (any, minimal and
# maximal variants), 32 six-slot traces per question, CALVER vs plurality vs confidence vs random,
# graded by the judge and by exact match. Outputs clear_bestofk.{json,md,png} in $OUT.
#
#   git clone https://github.com/OpenCausaLab/CLEAR            # the published records (Apache-2.0)
#   CLEAR=CLEAR/data/json_single bash recipes/clear_bestofk_gpu.sh
#   MODEL=Qwen/Qwen2.5-3B-Instruct ADAPTER=runs/grpo_qwen/final bash recipes/clear_bestofk_gpu.sh
#
# BACKEND=vllm uses vLLM when it is installed (pip install 'faithgrpo[vllm]'); extra flags are passed on,
# e.g. `bash recipes/clear_bestofk_gpu.sh --limit 200`. The sampling settings below are ours; the paper
# does not state its own.
set -euo pipefail
CLEAR=${CLEAR:-CLEAR/data/json_single}
MODEL=${MODEL:-Qwen/Qwen2.5-1.5B-Instruct}
OUT=${OUT:-runs/clear_bestofk_$(basename "$MODEL")}
ADAPTER_FLAGS=()
if [[ -n "${ADAPTER:-}" ]]; then ADAPTER_FLAGS=(--adapter "$ADAPTER"); fi
exec "${PYTHON:-python}" -m faithgrpo.cli clear-bestofk \
  --model "$MODEL" "${ADAPTER_FLAGS[@]}" \
  --clear "$CLEAR" \
  --tasks backdoor_adjustment_set,frontdoor_adjustment_set,d-separation \
  --samples 32 --k 1,2,4,8,16,32 --subsets 16 \
  --temperature 0.7 --top-p 0.95 --max-new-tokens 1024 --batch-size 64 \
  --backend "${BACKEND:-transformers}" --seed 0 \
  --out "$OUT" "$@"
