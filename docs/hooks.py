"""mkdocs hook: let mkdocstrings (griffe) read the ``faithgrpo.*`` namespace from the source tree.

pyproject.toml's ``[tool.setuptools.package-dir]`` maps top-level folders (``rewards/``, ``tasks/``,
...) into ``faithgrpo.*``; griffe finds modules by walking folders, so ``faithgrpo.rewards`` is not
under ``faithgrpo/``. This hook lays that mapping out as symlinks in a temporary folder and points the
python handler's ``paths`` at it: the API pages are read statically from the sources (nothing is
imported), whatever the install.
"""

from __future__ import annotations

import atexit
import re
import shutil
import tempfile
from pathlib import Path

from mkdocs.plugins import event_priority

_ROOT = Path(__file__).resolve().parent.parent


def _package_dirs() -> dict[str, str]:
    text = (_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib  # Python >= 3.11
    except ImportError:  # Python 3.10: the section is plain `"name" = "folder"` lines
        section = text.split("[tool.setuptools.package-dir]", 1)[1].split("\n[", 1)[0]
        return dict(re.findall(r'^\s*"([\w.]+)"\s*=\s*"([^"]+)"', section, flags=re.MULTILINE))
    return tomllib.loads(text)["tool"]["setuptools"]["package-dir"]


def _package_tree() -> Path:
    mapping = _package_dirs()
    out = Path(tempfile.mkdtemp(prefix="faithgrpo-docs-src-"))
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    # Deepest names last: "faithgrpo" first, so "faithgrpo.rewards" lands inside its folder.
    for name, folder in sorted(mapping.items(), key=lambda kv: kv[0].count(".")):
        target = out.joinpath(*name.split("."))
        source = _ROOT / folder
        if name.count(".") == 0:
            target.mkdir(parents=True)
            for entry in source.iterdir():
                if entry.name != "__pycache__" and not (target / entry.name).exists():
                    (target / entry.name).symlink_to(entry)
        else:
            if target.is_symlink() or target.exists():
                target.unlink()
            target.symlink_to(source, target_is_directory=True)
    return out


# Before mkdocstrings' own on_config, which builds the python handler (and reads `paths`) at once.
@event_priority(100)
def on_config(config, **kwargs):
    handlers = config.plugins["mkdocstrings"].config.handlers
    python = handlers.setdefault("python", {})
    python["paths"] = [str(_package_tree())]
    return config


_CODE_SPAN = re.compile(r"`[^`\n]*`")


def on_page_markdown(markdown: str, **kwargs) -> str:
    """GitHub needs ``\\|`` for a pipe inside inline code in a table cell; Python-Markdown keeps code
    spans whole and would print the backslash. The pages are written for GitHub; this drops it."""

    def unescape(line: str) -> str:
        if not line.lstrip().startswith("|"):
            return line
        return _CODE_SPAN.sub(lambda m: m.group(0).replace("\\|", "|"), line)

    return "\n".join(unescape(line) for line in markdown.split("\n"))
