"""The documentation cannot rot: the site builds with ``mkdocs build --strict`` (broken links, pages
missing from the nav, API identifiers that no longer exist and docstring warnings all fail it), the
README stays a front page, and every ``faithgrpo`` import and dotted name the README and docs/ show
still resolves."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from faithgrpo.watchdog import run_with_deadline

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 250


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"^```(?:python|py|pycon)[^\n]*\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def _import_statements(block: str) -> list[str]:
    """Every ``import faithgrpo...`` / ``from faithgrpo... import ...`` statement of a code block
    (parenthesised continuations joined; trailing comments dropped)."""
    statements, lines = [], block.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].split("#", 1)[0].rstrip()
        i += 1
        if not re.match(r"\s*(import faithgrpo\b|from faithgrpo(\.\w+)* import )", line):
            continue
        while line.count("(") > line.count(")") and i < len(lines):
            line += " " + lines[i].split("#", 1)[0].strip()
            i += 1
        statements.append(line.strip())
    return statements


# `faithgrpo.a.b` in inline code, not part of a longer path or file name (`OUT/.faithgrpo.lock`).
_DOTTED = re.compile(r"(?<![\w./~-])faithgrpo(?:\.[A-Za-z_]\w*)+")


def _dotted_names(text: str) -> set[str]:
    names = set()
    for span in re.findall(r"`([^`\n]+)`", text):
        names.update(_DOTTED.findall(span))
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL):
        names.update(_DOTTED.findall(block))
    return names


_CHECKER = r"""
import importlib, json, sys
statements, names = json.loads(open(sys.argv[1], encoding='utf-8').read())
failures = []
for where, statement in statements:
    try:
        exec(statement, {})
    except Exception as exc:
        failures.append(f"{where}: {statement!r}: {type(exc).__name__}: {exc}")
for where, name in names:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError as exc:
            failures.append(f"{where}: {name}: {exc}")
        break
    else:
        failures.append(f"{where}: {name}: no such module")
print(json.dumps(failures))
"""


def test_readme_is_a_front_page():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move detail to docs/"


def test_readme_relative_links_exist():
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\((?!https?://|mailto:|#)([^)\s#]+)(?:#[^)]*)?\)", text)
    assert any(t.startswith("docs/") for t in targets), "the README links no docs page"
    missing = sorted({t for t in targets if not (README.parent / t).exists()})
    assert not missing, f"README.md links to missing files: {missing}"


def test_every_faithgrpo_import_and_name_in_the_docs_resolves(tmp_path):
    statements, names = [], []
    for page in _pages():
        text = page.read_text(encoding="utf-8")
        where = str(page.relative_to(ROOT))
        for block in _python_blocks(text):
            statements += [(where, s) for s in _import_statements(block)]
        names += [(where, n) for n in sorted(_dotted_names(text))]
    assert statements, "no `from faithgrpo ... import` found in the README and docs/"
    shown = tmp_path / "shown.json"
    shown.write_text(json.dumps([statements, names]), encoding="utf-8")
    # A fresh interpreter: nothing this test process imported can hide a stale path.
    done = run_with_deadline(
        [sys.executable, "-c", _CHECKER, str(shown)], timeout=600, cwd=ROOT, native_stacks=False
    )
    assert done.returncode == 0 and not done.timed_out, done.log()
    failures = json.loads(done.stdout.strip().splitlines()[-1])
    assert not failures, "stale imports or names in the docs:\n" + "\n".join(failures)


def test_mkdocs_build_strict(tmp_path):
    """`mkdocs build --strict`: the site CI would publish builds without a single warning."""
    done = run_with_deadline(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # mkdocs-material's banner about its successor
        native_stacks=False,
    )
    assert done.returncode == 0 and not done.timed_out, done.log()
    for page in ("index.html", "rewards/index.html", "api/rewards/index.html", "api/tasks/index.html"):
        assert (tmp_path / "site" / page).is_file(), page


# A repository path in inline code: `verifier/graphs/criteria.py`, `recipes/configs/cpu_demo.yaml`, ...
_REPO_PATH = re.compile(
    r"(?<![\w./$~-])((?:rewards|trainers|eval|tasks|faithgrpo|recipes|benchmarks|tests|docs)/[\w./-]*[\w/])"
)


def test_repository_paths_in_the_docs_exist():
    """The 'where is X computed' tables and every file the pages name stay true as modules move."""
    missing = []
    for page in _pages():
        text = page.read_text(encoding="utf-8")
        spans = re.findall(r"`([^`\n]+)`", text)
        spans += re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)
        for span in spans:
            for path in _REPO_PATH.findall(span):
                if "<" not in path and not (ROOT / path).exists():
                    missing.append(f"{page.relative_to(ROOT)}: {path}")
    assert not missing, "files named in the docs that do not exist:\n" + "\n".join(sorted(set(missing)))
