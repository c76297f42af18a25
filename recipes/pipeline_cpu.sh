#!/usr/bin/env bash
# The end-to-end story on CPU with the embedded SmolLM2-135M-Instruct:
#   1. gold-trace SFT warm start (recipes/sft_traces.py; cached, see --warm_start_config),
#   2. GRPO + LoRA from it with every faithgrpo reward (recipes/grpo_cros.py, cpu_demo.yaml),
#   3. `faithgrpo eval` of the base, SFT and GRPO checkpoints side by side, in one report directory.
#
#   bash recipes/pipeline_cpu.sh                      # outputs in runs/pipeline
#   OUT=runs/p2 bash recipes/pipeline_cpu.sh --max_steps 4     # extra flags go to grpo_cros.py
#   make pipeline
#
# Environment: PYTHON (default .venv/bin/python when it exists, else python), OUT (runs/pipeline),
# MODEL (the base model for every stage, default embedded), EVAL_FLAGS (replaces the evaluation
# settings below). Wall time on a 2-core CPU: see README,
# "End to end: SFT -> GRPO -> evaluation".
set -euo pipefail

cd "$(dirname "$0")/.."
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python; fi
fi
OUT=${OUT:-runs/pipeline}
MODEL=${MODEL:-embedded}
# Small on purpose (CPU): 8 held-out prompts (another seed) of the training distribution x 4 samples,
# K up to 4, completions as long as in training, the hint protocol on 4 questions with 2 hint types,
# AOC/CIR/CRoS delta on 8 completions.
# The training distribution: the demo config's `causal` fields, read from it so the two cannot drift.
TASK_CONFIG=$("$PYTHON" -c 'import json, sys, yaml
print(json.dumps({"causal_graph": yaml.safe_load(open(sys.argv[1]))["causal"]}))' recipes/configs/cpu_demo.yaml)
EVAL_FLAGS=${EVAL_FLAGS:-"--tasks causal_graph --prompts 8 --samples 4 --k 1,2,4 --max-new-tokens 160 --seed 101 \
--hints sycophancy,metadata --hint-questions 4 --min-switched 2 --faithfulness-pairs 8 --batch-size 16"}
if [[ "$EVAL_FLAGS" != *--task-config* && "$EVAL_FLAGS" == *causal_graph* ]]; then
    TASK_CONFIG_FLAG=(--task-config "$TASK_CONFIG")
else
    TASK_CONFIG_FLAG=()
fi

started=$SECONDS
echo "[pipeline] 1+2. SFT warm start (run or reused) and GRPO -> $OUT/grpo"
"$PYTHON" recipes/grpo_cros.py --config recipes/configs/cpu_demo.yaml --model_name_or_path "$MODEL" \
    --output_dir "$OUT/grpo" "$@"
trained=$SECONDS

# The adapter GRPO started from (grpo_cros.py notes it); none when run with --warm_start_config none.
SFT_CHECKPOINT=()
if [[ -f "$OUT/grpo/warm_start.json" ]]; then
    SFT=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["adapter"])' "$OUT/grpo/warm_start.json")
    SFT_CHECKPOINT=(--checkpoint sft "$MODEL" "$SFT")
fi
echo "[pipeline] 3. evaluating base, ${SFT:+SFT ($SFT), }GRPO ($OUT/grpo) -> $OUT/eval"
# shellcheck disable=SC2086  # EVAL_FLAGS is a list of flags
"$PYTHON" -m faithgrpo.cli eval --model "$MODEL" --label base \
    ${SFT_CHECKPOINT[@]+"${SFT_CHECKPOINT[@]}"} \
    --checkpoint grpo "$MODEL" "$OUT/grpo" \
    $EVAL_FLAGS ${TASK_CONFIG_FLAG[@]+"${TASK_CONFIG_FLAG[@]}"} --no-progress --out "$OUT/eval"

echo "[pipeline] done in $((SECONDS - started)) s (training $((trained - started)) s, evaluation $((SECONDS - trained)) s)"
echo "[pipeline] report: $OUT/eval/report.md"
