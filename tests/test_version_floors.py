"""The lowest supported versions were run: ``requirements-floors.txt`` pins them, ``pyproject.toml``'s
floors are those pins, and the reward, recipe and eval smoke tests pass in an environment that has
exactly them (``make floors``; ``.ci/run`` builds it, so CI runs this test too).

The environment is ``.venv-floors`` (or ``$FAITHGRPO_FLOOR_PYTHON``); without it the smoke test skips
and says how to build it. The pin checks need nothing and always run.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from faithgrpo.watchdog import run_with_deadline

tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python >= 3.11's tomllib")

ROOT = Path(__file__).resolve().parents[1]
PINS_FILE = ROOT / "requirements-floors.txt"
FLOORED = ("trl", "transformers", "peft", "accelerate", "datasets")
# The reward, recipe and eval smoke tests run at the floors (slow ones included: a GRPO step, a
# warm start, the trl CLI, generation and the selection experiment's re-scoring).
SMOKE_TESTS = (
    "tests/test_models.py",
    "tests/test_outcome.py",
    "tests/test_format.py",
    "tests/test_calver.py",
    "tests/test_calver_variants.py",
    "tests/test_cros.py",
    "tests/test_reward_pickle.py",
    "tests/test_integrations.py",
    "tests/test_data_export.py",
    "tests/test_trainers.py",
    "tests/test_recipes.py",
    "tests/test_warm_start.py",
    "tests/test_sft.py",
    "tests/test_generation.py",
    "tests/test_passk.py",
    "tests/test_eval_report.py",
    "tests/test_selection_experiment.py",
)


def _pins() -> dict[str, str]:
    pins = {}
    for line in PINS_FILE.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[name.strip().lower()] = version.strip()
    return pins


def _pyproject_floors() -> dict[str, str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    floors = {}
    for dep in deps:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)", dep.split(";")[0].strip())
        if match:
            floors[match.group(1).lower()] = match.group(2)
    return floors


def test_the_pinned_floors_are_pyprojects_floors_for_every_floored_package():
    pins, floors = _pins(), _pyproject_floors()
    assert sorted(pins) == sorted(FLOORED), "requirements-floors.txt pins exactly the floored packages"
    for name in FLOORED:
        assert floors.get(name) == pins[name], (
            f"pyproject.toml says {name}>={floors.get(name)}, the floor that was run is {pins[name]}"
        )


def _floor_python() -> Path | None:
    given = os.environ.get("FAITHGRPO_FLOOR_PYTHON")
    path = Path(given) if given else ROOT / ".venv-floors" / "bin" / "python"
    return path if path.is_file() else None


@pytest.mark.slow
def test_smoke_tests_pass_at_the_floors():
    python = _floor_python()
    if python is None:
        pytest.skip(
            "no floor environment (.venv-floors): build it with `make floors-setup`, or run `make floors`"
        )
    probe = run_with_deadline(
        [str(python), "-c", "import json, importlib.metadata as m; "
         f"print(json.dumps({{n: m.version(n) for n in {list(FLOORED)!r}}}))"],
        timeout=300,
    )  # fmt: skip
    assert probe.returncode == 0, probe.log()
    installed = {k.lower(): v for k, v in json.loads(probe.stdout.strip().splitlines()[-1]).items()}
    assert installed == _pins(), (
        "the floor environment does not hold the pinned floors: rerun make floors-setup"
    )
    done = run_with_deadline(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *SMOKE_TESTS],
        timeout=3000,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.log()
