"""The package layout contract (docs/development.md, "Layout"; issue #31): small files, small folders, no import circles,
one home per name.

Static checks walk the source folders that ``pyproject.toml`` maps into ``faithgrpo.*`` (its
``[tool.setuptools.package-dir]``); the export check imports each package. Checks are parametrized per
package so a failure names the folder it is in.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 520
MAX_MODULES = 12  # modules directly in one package folder, ``__init__`` not counted


def _package_dirs() -> dict[str, Path]:
    """``faithgrpo.x`` -> its folder, read from pyproject's ``package-dir`` table (no tomllib on 3.10)."""
    text = (ROOT / "pyproject.toml").read_text()
    table = text.split("[tool.setuptools.package-dir]", 1)[1].split("\n[", 1)[0]
    dirs = {name: ROOT / folder for name, folder in re.findall(r'^"([\w.]+)"\s*=\s*"([^"]+)"', table, re.M)}
    assert "faithgrpo" in dirs and "faithgrpo.tasks" in dirs, table
    return dirs


def _modules() -> dict[str, Path]:
    """Every module of the namespace: dotted name -> file (packages by their ``__init__.py``)."""
    dirs = _package_dirs()
    mods: dict[str, Path] = {}
    for pkg, folder in dirs.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if any(p.startswith(".") or p == "__pycache__" for p in parts):
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join([pkg, *parts])] = path
    return mods


MODULES = _modules()
PACKAGES = sorted(n for n, p in MODULES.items() if p.name == "__init__.py")


def _top(name: str) -> str:
    """The mapped package a module belongs to, for test ids: ``faithgrpo.tasks``, ``faithgrpo``, ..."""
    owners = [pkg for pkg in _package_dirs() if name == pkg or name.startswith(pkg + ".")]
    return max(owners, key=len)


def _imports(name: str, path: Path) -> list[tuple[str, str | None, int]]:
    """(module, imported name or None, line) for every import in the file, relative ones resolved;
    imports inside functions and under ``TYPE_CHECKING`` count too."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_pkg = path.name == "__init__.py"
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, None, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found += [(module, a.name, node.lineno) for a in node.names]
    return found


def import_graph(modules: dict[str, Path]) -> nx.DiGraph:
    """Module -> module edges among ``modules``; ``from pkg import sub`` points at the submodule."""
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        for module, imported, _ in _imports(name, path):
            target = f"{module}.{imported}" if imported and f"{module}.{imported}" in modules else module
            if target in modules and target != name:
                graph.add_edge(name, target)
    return graph


def find_cycles(graph: nx.DiGraph) -> list[list[str]]:
    """Each strongly connected component with more than one module, as one cycle through it."""
    cycles = []
    for component in nx.strongly_connected_components(graph):
        if len(component) > 1:
            cycles.append([a for a, _ in nx.find_cycle(graph.subgraph(component))])
    return sorted(cycles)


def test_the_walk_finds_the_namespace():
    # independent expectations: names the README documents, and both sides of the package-dir mapping
    for name in ("faithgrpo", "faithgrpo.rewards.cros", "faithgrpo.trainers.grpo", "faithgrpo.tasks",
                 "faithgrpo.tasks.knights_knaves", "faithgrpo.tasks.clear", "faithgrpo.eval"):  # fmt: skip
        assert name in MODULES, name
    assert MODULES["faithgrpo.tasks"] == ROOT / "tasks" / "__init__.py"
    assert not any(".venv" in str(p) for p in MODULES.values())


def test_cycle_finder_finds_a_fabricated_cycle():
    graph = nx.DiGraph([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")])
    cycles = find_cycles(graph)
    assert len(cycles) == 1 and sorted(cycles[0]) == ["a", "b", "c"]
    assert find_cycles(nx.DiGraph([("a", "b"), ("b", "c")])) == []


def test_import_graph_resolves_submodule_imports(tmp_path):
    (tmp_path / "pkg").mkdir()
    files = {
        "pkg": tmp_path / "pkg" / "__init__.py",
        "pkg.a": tmp_path / "pkg" / "a.py",
        "pkg.b": tmp_path / "pkg" / "b.py",
    }
    files["pkg"].write_text("")
    files["pkg.a"].write_text("from pkg import b\n")
    files["pkg.b"].write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import X\n")
    graph = import_graph(files)
    assert graph.has_edge("pkg.a", "pkg.b") and graph.has_edge("pkg.b", "pkg.a")
    assert find_cycles(graph)


@pytest.mark.parametrize("top", sorted({_top(n) for n in MODULES}))
def test_no_file_over_the_line_limit(top):
    long = {
        name: n
        for name, path in MODULES.items()
        if _top(name) == top and (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"files over {MAX_LINES} lines: {long}"


def test_no_import_cycle():
    cycles = find_cycles(import_graph(MODULES))
    assert not cycles, "import cycles (TYPE_CHECKING and function-level imports included): " + "; ".join(
        " -> ".join([*c, c[0]]) for c in cycles
    )


# Floors, lowest first: a module imports only from its own floor or below (function-level and
# TYPE_CHECKING imports included). The root's helpers (text, models, ...) are the bottom floor.
FLOORS = ("faithgrpo", "faithgrpo.verifier", "faithgrpo.tasks", "faithgrpo.rewards", "faithgrpo.eval", "faithgrpo.trainers",
          "faithgrpo.integrations", "faithgrpo.cli")  # fmt: skip


def floor_of(name: str) -> int:
    """The index in `FLOORS` of the longest floor that ``name`` is or lies under."""
    owners = [i for i, f in enumerate(FLOORS) if name == f or name.startswith(f + ".")]
    return max(owners, key=lambda i: len(FLOORS[i]))


def upward_imports(graph: nx.DiGraph) -> list[str]:
    """``a -> b`` for every import of a module on a higher floor."""
    return sorted(f"{a} -> {b}" for a, b in graph.edges if floor_of(b) > floor_of(a))


def test_upward_import_check_finds_a_fabricated_one():
    graph = nx.DiGraph(
        [("faithgrpo.tasks.mix", "faithgrpo.rewards.outcome"), ("faithgrpo.eval.x", "faithgrpo.text")]
    )
    assert upward_imports(graph) == ["faithgrpo.tasks.mix -> faithgrpo.rewards.outcome"]


def test_imports_only_go_down():
    bad = upward_imports(import_graph(MODULES))
    assert not bad, "imports of a higher floor (" + " < ".join(FLOORS) + "): " + "; ".join(bad)


def private_imports(modules: dict[str, Path]) -> list[str]:
    """``file:line from module import _name`` for each private name imported from a faithgrpo module."""
    bad = []
    for name, path in modules.items():
        for module, imported, line in _imports(name, path):
            if not module.startswith(("faithgrpo", "pkg")) or imported is None:
                continue
            if imported.startswith("_") and not imported.startswith("__"):
                bad.append(f"{path.name}:{line} from {module} import {imported}")
    return bad


def test_private_import_check_finds_a_fabricated_one(tmp_path):
    (tmp_path / "a.py").write_text("from .b import _helper, public\nfrom . import __version__\n")
    assert private_imports({"pkg.a": tmp_path / "a.py"}) == ["a.py:1 from pkg.b import _helper"]


@pytest.mark.parametrize("top", sorted({_top(n) for n in MODULES}))
def test_no_private_name_imported_across_modules(top):
    bad = private_imports({n: p for n, p in MODULES.items() if _top(n) == top})
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)


@pytest.mark.parametrize("package", PACKAGES)
def test_few_modules_per_package(package):
    folder = MODULES[package].parent
    modules = sorted(p.name for p in folder.glob("*.py") if p.name != "__init__.py")
    assert len(modules) <= MAX_MODULES, f"{folder.relative_to(ROOT)} holds {len(modules)} modules: {modules}"


def _literal_all(path: Path) -> list[str] | None:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return None


@pytest.mark.parametrize("top", sorted({_top(n) for n in MODULES}))
def test_a_module_all_lists_only_what_it_defines(top):
    bad = []
    for name, path in MODULES.items():
        if _top(name) != top or path.name == "__init__.py":
            continue
        names = _literal_all(path)
        if not names:
            continue
        module = importlib.import_module(name)
        for export in names:
            obj = getattr(module, export)
            home = getattr(obj, "__module__", None)
            if (isinstance(obj, type) or callable(obj)) and home not in (None, name):
                bad.append(f"{name}.{export} is {home}.{export}")
            tree = ast.parse(path.read_text(encoding="utf-8"))
            imported = {
                a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names
            }
            if export in imported:
                bad.append(f"{name}.{export} is imported, not defined")
    assert not bad, "re-exports in non-__init__ modules: " + ", ".join(sorted(set(bad)))


@pytest.mark.parametrize("package", PACKAGES)
def test_package_exports_live_in_their_package(package):
    module = importlib.import_module(package)
    names = list(getattr(module, "__all__", ()))
    bad = []
    for export in names:
        if export.startswith("__"):
            continue
        if export.startswith("_"):
            bad.append(f"{export} is private")
            continue
        obj = getattr(module, export)
        home = getattr(obj, "__module__", None)
        if not (isinstance(obj, type) or callable(obj)) or home is None:
            continue  # constants carry no home; their import line is checked statically below
        if home in (package, "typing"):
            continue
        if not home.startswith(package + ".") or home not in MODULES:
            bad.append(f"{export}: __module__ is {home}")
            continue
        # the home defines it: the object is an attribute of its home under the same name
        if getattr(importlib.import_module(home), export, None) is not obj:
            bad.append(f"{export}: {home} does not define it")
        elif _literal_all(MODULES[home]) is not None and export not in (_literal_all(MODULES[home]) or []):
            bad.append(f"{export}: not in {home}.__all__")
    assert not bad, f"{package}.__all__: " + "; ".join(bad)


def test_documented_homes():
    """Independent expectations: the public names the README names, each at its home."""
    from faithgrpo.tasks import clear, knights_knaves
    from faithgrpo.tasks.certificates.gold import gold_trace

    expected = {
        gold_trace: "faithgrpo.tasks.certificates.gold",
        clear.judge: "faithgrpo.tasks.clear.candidates",
        clear.to_problem: "faithgrpo.tasks.clear.records",
        knights_knaves.check_kk_trace: "faithgrpo.tasks.knights_knaves.checker",
        knights_knaves.gold_kk_trace: "faithgrpo.tasks.knights_knaves.gold",
    }
    for obj, home in expected.items():
        assert obj.__module__ == home, (obj, obj.__module__, home)
    import faithgrpo
    import faithgrpo.tasks as tasks

    assert (
        faithgrpo.build_dataset is tasks.build_dataset
        and tasks.build_dataset.__module__ == "faithgrpo.tasks.mix"
    )
    assert faithgrpo.CRoSReward.__module__ == "faithgrpo.rewards.cros.reward"
    import faithgrpo.verifier as verifier

    assert verifier.CausalGraph.__module__ == "faithgrpo.verifier.graphs.model"
    assert verifier.grade_answer is faithgrpo.grade_answer
    assert not hasattr(tasks, "CausalGraph")  # one home: the verifier's names are not re-exported by tasks


# A committed file (results pages included) must not name this machine's directories.
_ABSOLUTE_PATH_RE = re.compile(r"(?:^|[^A-Za-z0-9_.~/])/(?:root|home|work|tmp|Users|mnt|opt|var/folders)/")
_TEXT_SUFFIXES = {".py", ".md", ".json", ".yaml", ".yml", ".sh", ".toml", ".txt", ".cfg", ".ini", ""}


def absolute_paths(files: dict[str, str]) -> list[str]:
    """``name:line`` for every line of ``files`` (name -> text) that holds an absolute machine path."""
    return [
        f"{name}:{number}"
        for name, text in files.items()
        for number, line in enumerate(text.splitlines(), 1)
        if _ABSOLUTE_PATH_RE.search(line)
    ]


def test_absolute_path_check_finds_a_fabricated_one():
    files = {
        "a.md": "see `/root/.cache/x`\nrelative runs/x\n",
        "b.json": '{"p": "~/.cache/y", "q": "a/tmp/b"}',
    }
    assert absolute_paths(files) == ["a.md:1"]


def _tracked_text_files() -> dict[str, str]:
    """Every tracked text file (``git ls-files``) under 2 MB, name -> text; skips outside a git checkout."""
    import subprocess

    try:
        listed = subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
        ).stdout.split()
    except (OSError, subprocess.SubprocessError) as err:
        pytest.skip(f"not a git checkout ({err})")
    files = {}
    for name in listed:
        path = ROOT / name
        if path.suffix in _TEXT_SUFFIXES and path.is_file() and path.stat().st_size < 2_000_000:
            try:
                files[name] = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
    return files


def test_no_committed_file_names_a_machine_path():
    files = _tracked_text_files()
    bad = absolute_paths({n: t for n, t in files.items() if n != "tests/test_layout.py"})
    assert not bad, "absolute machine paths in committed files: " + ", ".join(bad[:20])


# The contract is the project's own docs: no committed file cites a document outside the repository.
_OUTSIDE_DOCUMENT_MARKERS = ("DESIGN §", "DESIGN.md", "CLEAR_FORMAT", "../shared")


def outside_citations(files: dict[str, str]) -> list[str]:
    """``name:line`` for every line of ``files`` (name -> text) that cites a document outside the repository."""
    return [
        f"{name}:{number}"
        for name, text in files.items()
        for number, line in enumerate(text.splitlines(), 1)
        if any(marker in line for marker in _OUTSIDE_DOCUMENT_MARKERS)
    ]


def test_outside_citation_check_finds_a_fabricated_one():
    files = {
        "a.py": '"""CRoS (DESIGN §3.3)."""\nx = 1\n',
        "b.md": 'see (docs/rewards.md, "CRoS")\nthe contract is DESIGN.md\n',
        "c.sh": "cat ../shared/notes.txt\n",
        "d.md": "a DESIGNER's note, docs/shared/x, DESIGN section 3\n",
        "e.py": '"""Read a record against ``CLEAR_FORMAT.md``."""\nclear_format = 1\n',
    }
    assert outside_citations(files) == ["a.py:1", "b.md:2", "c.sh:1", "e.py:1"]


def test_no_file_cites_a_document_outside_the_repository():
    files = _tracked_text_files()
    bad = outside_citations({n: t for n, t in files.items() if n != "tests/test_layout.py"})
    assert not bad, (
        "citations of a document outside the repository (cite the docs/ page instead, e.g. "
        '(docs/rewards.md, "CRoS")): ' + ", ".join(bad[:20])
    )
