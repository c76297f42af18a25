#!/usr/bin/env bash
# GPU check (issue 16, point 4): one short, offline run on one GPU, at most 8 minutes wall clock.
#
# Uses the embedded SmolLM2-135M-Instruct (faithgrpo.models; nothing is fetched from a hub:
# HF_HUB_OFFLINE=1, TRANSFORMERS_OFFLINE=1) and measures, each step in its own process under
# `timeout`, a failure recorded without stopping the others:
#
#   step     benchmarks/bench_step.py      GRPO step time, full reward stack (outcome, format,
#                                          trace_format, CRoS, CALVER) ÷ outcome + format, at M = 4,
#                                          G = 8 (one prompt × 8 completions per step)    target <= 1.1
#   cros     benchmarks/bench_cros.py      a CRoS call ÷ one bare forward over the same (M+1)·G
#                                          sequences, M = 4, G = 8                         target <= 1.25
#   gen      benchmarks/bench_eval.py      generation tokens/s (generate_completions, transformers)
#   ablation recipes/ablation.py           the reward ablation (issue 27) shortened: the CPU config's
#                                          SFT warm start and 4 arms x 8 GRPO steps on the GPU, then the
#                                          paired evaluation on 32 prompts per task (ablation.json holds
#                                          the results page's JSON); it runs first, the others share
#                                          what is left of the budget
#   vllm     benchmarks/bench_vllm.py      vLLM (the optional extra): greedy equality with generate
#                                          on 16 prompts, tokens/s of both at G = 8, and 4 GRPO steps in
#                                          colocate mode whose per-step vLLM-vs-trainer log-prob
#                                          difference shows the weights synced after every update
#                                          (prints {"skipped": ...} where vLLM is not installed); it
#                                          runs first
#   bestofk  benchmarks/bench_bestofk_overhead.py
#                                          CALVER best-of-K scoring + selection time ÷ generation time
#                                          at K = 8, on the samples and on gold traces     paper: 0.07
#
# Writes ${OUT:-runs/gpu_check}/<step>.json (stdout of each benchmark), <step>.log (its stderr),
# env.json (GPU, versions), nvidia-smi.txt and summary.json (the four headline figures, the GPU name,
# each step's exit status and seconds), and prints summary.json at the end. Exit status 0 when every
# step passed, 1 otherwise.
#
# The step time ratio headlined is `ratio_all_scored` (every completion a gold six-slot trace, so
# CRoS and CALVER do their full work: a trace-writing policy's steady state); `ratio` (on what the
# untrained policy generates, which CRoS and CALVER mostly reject fast) is reported next to it. The
# GRPO runs skip the recipe's gold-trace SFT warm start (--warm_start_config none): it runs on CPU
# and would take minutes of the budget.
#
# Usage:
#   bash benchmarks/gpu_check.sh                        # on the GPU machine
#   GPU_CHECK_SMOKE=1 bash benchmarks/gpu_check.sh      # CPU smoke run: tiny models, minimal steps
# Environment: OUT (output folder), PYTHON (interpreter; default .venv/bin/python, else python),
# GPU_CHECK_BUDGET (total seconds, default 570), GPU_CHECK_SMOKE, FAITHGRPO_CACHE (model cache).

set -u
cd "$(dirname "$0")/.."

OUT_DIR="${OUT:-runs/gpu_check}"
mkdir -p "$OUT_DIR"
if [ -n "${PYTHON:-}" ]; then
    PY="$PYTHON"
elif [ -x .venv/bin/python ]; then
    PY=.venv/bin/python
else
    PY=python
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
export TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1

SMOKE="${GPU_CHECK_SMOKE:-0}"
BUDGET="${GPU_CHECK_BUDGET:-570}"
START=$(date +%s)
DEADLINE=$((START + BUDGET))
RESERVE=10 # seconds kept for the summary
STATUS="$OUT_DIR/status.tsv"
: >"$STATUS"

if [ "$SMOKE" = 1 ]; then
    DEVICE=cpu
else
    DEVICE=cuda
fi
echo "[gpu_check] out=$OUT_DIR python=$PY device=$DEVICE smoke=$SMOKE budget=${BUDGET}s" >&2

# run_step NAME BUDGET_S CMD...: stdout to NAME.json, stderr to NAME.log, "NAME rc seconds" to status.
run_step() {
    local name=$1 budget=$2
    shift 2
    local left=$((DEADLINE - RESERVE - $(date +%s)))
    if [ "$left" -lt "$budget" ]; then budget=$left; fi
    if [ "$budget" -lt 5 ]; then
        echo "[gpu_check] $name: skipped, the total budget is spent" >&2
        printf '%s\t%s\t%s\n' "$name" skipped 0 >>"$STATUS"
        return
    fi
    local cmd="$*"
    cmd=${cmd//$'\n'/ }
    echo "[gpu_check] $name (<= ${budget}s): ${cmd:0:240}" >&2
    local t0 rc
    t0=$(date +%s)
    timeout -k 10 "$budget" "$@" >"$OUT_DIR/$name.json" 2>"$OUT_DIR/$name.log"
    rc=$?
    printf '%s\t%s\t%s\n' "$name" "$rc" "$(($(date +%s) - t0))" >>"$STATUS"
    if [ "$rc" -ne 0 ]; then
        echo "[gpu_check] $name: exit $rc (124 = timed out); last lines of $OUT_DIR/$name.log:" >&2
        tail -n 5 "$OUT_DIR/$name.log" >&2
    fi
}

# 0. Environment, and the embedded checkpoint (de-quantised from its GGUF once, then cached).
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L | tee "$OUT_DIR/nvidia-smi.txt" >&2
else
    echo "[gpu_check] nvidia-smi: not found" >&2
fi
ENV_PY='
import json, platform, torch, transformers, trl
cuda = torch.cuda.is_available()
info = {"torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__,
        "cuda": torch.version.cuda, "cuda_available": cuda,
        "gpu": torch.cuda.get_device_name() if cuda else None,
        "bf16_supported": cuda and torch.cuda.is_bf16_supported(),
        "python": platform.python_version(), "platform": platform.platform()}
if not '"$SMOKE"':
    from faithgrpo.models import embedded_model_path
    info["embedded_model"] = str(embedded_model_path())
print(json.dumps(info, indent=2))
'
run_step env 90 "$PY" -c "$ENV_PY"

# 1-4. The measurements. Smoke: tiny in-process models, minimal sizes, on CPU.
if [ "$SMOKE" = 1 ]; then
    MODEL=(--tiny)
    STEP_SIZES=(--steps 1 --rounds 2 --repeats 1 --gold_prompts 1)
    CROS_ARGS=(--tiny --repeats 2)
    GEN_ARGS=(--rounds 1 --max-new-tokens 16)
    BOK_ARGS=(--tiny --prompts 2 --max-new-tokens 16 --batch-size 16)
else
    MODEL=(--model embedded)
    STEP_SIZES=(--steps 2 --rounds 2 --repeats 3 --gold_prompts 2)
    CROS_ARGS=(--repeats 5 --dtype bfloat16)
    GEN_ARGS=(--embedded --rounds 3 --max-new-tokens 128)
    BOK_ARGS=(--model embedded --prompts 16 --max-new-tokens 512 --batch-size 64)
fi

# vLLM first (issue 38): generation equality and speed, GRPO with weight sync.
if [ "$SMOKE" = 1 ]; then
    run_step vllm 30 "$PY" benchmarks/bench_vllm.py --steps 1 --prompts 2
else
    run_step vllm 150 "$PY" benchmarks/bench_vllm.py --steps 4 --prompts 16 --timeout 130
fi

# 1. The reward ablation, shortened. On the GPU: the CPU config's SFT config and arms with GPU settings.
ABLATION_OUT="$OUT_DIR/ablation"
export ABLATION_RESULTS="$ABLATION_OUT/results/ablation"
if [ "$SMOKE" = 1 ]; then
    ABLATION_ARGS=(--smoke)
else
    "$PY" -c 'import sys, yaml
config = yaml.safe_load(open("recipes/configs/sft_ablation_cpu.yaml"))
config.update(use_cpu=False, bf16=True, dtype="bfloat16")  # the CPU warm start, on the GPU
yaml.safe_dump(config, open(sys.argv[1], "w"))' "$OUT_DIR/sft_ablation_gpu_check.yaml"
    ABLATION_ARGS=(--set "warm_start_config=$PWD/$OUT_DIR/sft_ablation_gpu_check.yaml"
        --set "warm_start_cache=$PWD/$OUT_DIR/warm_start" --set train.use_cpu=false --set train.bf16=true
        --set train.dtype=bfloat16 --set train.max_steps=8 --set eval.prompts=32 --set eval.bootstrap=500
        --set eval.hint_questions=16)
fi
run_step ablation 300 bash -c '"$0" recipes/ablation.py "$@" >&2 && cat "$ABLATION_RESULTS.json"' "$PY" \
    "${ABLATION_ARGS[@]}" --output_dir "$ABLATION_OUT" --results "$ABLATION_RESULTS"
run_step step 170 "$PY" benchmarks/bench_step.py "${MODEL[@]}" --device "$DEVICE" \
    --num_generations 8 --scrambles 4 --cros_batch_size 40 "${STEP_SIZES[@]}" \
    --recipe_args "--warm_start_config none"
run_step cros 50 "$PY" benchmarks/bench_cros.py "${CROS_ARGS[@]}" --device "$DEVICE" \
    --group-size 8 --scrambles 4
run_step gen 50 "$PY" benchmarks/bench_eval.py --skip-metrics --device "$DEVICE" "${GEN_ARGS[@]}"
run_step bestofk 130 "$PY" benchmarks/bench_bestofk_overhead.py "${BOK_ARGS[@]}" --device "$DEVICE" --k 8

# Summary: the four headline figures, the GPU, each step's status.
SUMMARY_PY='
import json, os, sys, time
out, smoke, start = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])

def load(name):
    try:
        with open(os.path.join(out, name + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def pick(data, *keys):
    for key in keys:
        if not isinstance(data, (dict, list)):
            return None
        try:
            data = data[key]
        except (KeyError, IndexError, TypeError):
            return None
    return data

steps = {}
with open(os.path.join(out, "status.tsv")) as f:
    for line in f:
        name, rc, seconds = line.rstrip("\n").split("\t")
        steps[name] = {"ok": rc == "0", "exit": rc, "seconds": int(seconds)}
env, step, cros, gen, bok, abl, vllm = (
    load(n) for n in ("env", "step", "cros", "gen", "bestofk", "ablation", "vllm"))
abl_summary = pick(abl, "summary") or {}
abl_k = str(max(pick(abl_summary, "ks") or [1]))
abl_tasks = pick(abl_summary, "tasks") or []
m4 = next((r for r in (pick(cros, "results") or []) if r.get("M") == 4), None)
gen_model = "tiny_llama" if smoke else "embedded_smollm2_135m"
gpu = pick(env, "gpu")
if gpu is None:
    try:
        gpu = open(os.path.join(out, "nvidia-smi.txt")).read().strip() or None
    except OSError:
        pass
summary = {
    "check": "gpu_check (issue 16)",
    "smoke": smoke,
    "gpu": gpu,
    "torch": pick(env, "torch"),
    "transformers": pick(env, "transformers"),
    "model": "tiny random Llama (smoke)" if smoke else "embedded SmolLM2-135M-Instruct",
    "step_time_ratio_full_vs_outcome_format": {
        "M": 4, "G": pick(step, "num_generations"),
        "ratio_all_scored": pick(step, "results", "M=4", "all_scored", "ratio_all_scored"),
        "ratio_on_policy": pick(step, "results", "M=4", "ratio"),
        "cros_scored_frac_on_policy": pick(step, "results", "M=4", "cros_scored_frac"),
        "base_step_s": pick(step, "base_step_s"),
        "full_step_s": pick(step, "results", "M=4", "full_step_s"),
        "bf16": pick(step, "bf16"),
        "target": 1.1,
    },
    "cros_vs_bare_forward": {
        "M": 4, "G": pick(cros, "group_size"), "dtype": pick(cros, "dtype"),
        "ratio": pick(m4, "ratio"), "cros_s": pick(m4, "cros_s"), "bare_forward_s": pick(m4, "bare_forward_s"),
        "target": 1.25,
    },
    "generation_tokens_per_s": {
        "bench_eval": pick(gen, "generation", gen_model, "tokens_per_s"),
        "bench_eval_batch": pick(gen, "generation", gen_model, "sequences_per_batch"),
        "bestofk": pick(bok, "generation", "tokens_per_s"),
        "bestofk_batch": pick(bok, "generation", "batch_size"),
        "dtype": pick(bok, "dtype"),
    },
    "calver_best_of_k_overhead": {
        "K": pick(bok, "k"), "completions": pick(bok, "completions"),
        "overhead_samples": pick(bok, "overhead"),
        "overhead_gold": pick(bok, "gold_overhead"),
        "scoring_ms_per_completion_gold": pick(bok, "gold", "scoring_ms_per_completion"),
        "generation_s": pick(bok, "generation", "seconds"),
        "paper": 0.07,
    },
    "vllm": {
        "skipped": pick(vllm, "skipped"),
        "greedy_equal_prompts": pick(vllm, "generation", "greedy_equal_prompts"),
        "prompts": pick(vllm, "generation", "prompts"),
        "tokens_per_second": pick(vllm, "generation", "tokens_per_second"),
        "grpo_exit": pick(vllm, "training", "exit"),
        "logp_difference_per_step": [pick(s, "sampling/sampling_logp_difference/mean")
                                     for s in (pick(vllm, "training", "steps") or [])],
    },
    "ablation": {
        "baseline": pick(abl_summary, "baseline"),
        "cot_pass_at_k": {task: {label: pick(m, "tasks", task, "cot_pass@k", abl_k, "value")
                                 for label, m in (pick(abl_summary, "checkpoints") or {}).items()}
                          for task in abl_tasks},
        "paired_cot_pass_at_k": {task: {label: pick(p, "tasks", task, "cot_pass@k", abl_k)
                                        for label, p in (pick(abl_summary, "paired") or {}).items()}
                                 for task in abl_tasks},
        "K": int(abl_k),
    },
    "steps": steps,
    "all_ok": all(s["ok"] for s in steps.values()),
    "wall_s": round(time.time() - start),
}
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(summary, f, indent=2)
print(json.dumps(summary, indent=2))
sys.exit(0 if summary["all_ok"] else 1)
'
"$PY" -c "$SUMMARY_PY" "$OUT_DIR" "$SMOKE" "$START"
