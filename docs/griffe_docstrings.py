"""Griffe extension for the API pages: two reST habits of the library's docstrings, made Markdown.

- Doctest sections are headed ``Example:``; griffe's Google parser knows only ``Examples:`` and would
  render the doctest lines as Markdown (``[f(x) for x in xs]`` then reads as a link).
- Sphinx roles (``:func:`~faithgrpo.rewards.calver.score_trace```) become code spans (``score_trace``).
- reST simple tables (``=====  =====`` borders) become preformatted text blocks.

Only the rendered text changes; the docstrings in the sources stay as they are.
"""

from __future__ import annotations

import re

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:\s*$", re.MULTILINE)
_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|obj|exc|const):`(~?)([^`<]+?)(?:\s*<[^>]*>)?`")


_BORDER = re.compile(r"^(\s*)=+(?:[ \t]+=+)+\s*$")


def _tables(text: str) -> str:
    """Fence every reST simple table (top border, header rule, bottom border) as a text block."""
    out: list[str] = []
    borders = 0
    for line in text.split("\n"):
        border = _BORDER.match(line)
        if border and borders == 0:
            out.append(f"{border.group(1)}```text")
        out.append(line)
        if border:
            borders += 1
            if borders == 3:
                out.append(f"{border.group(1)}```")
                borders = 0
    if borders:  # not a three-border table after all: leave the text as it was
        return text
    return "\n".join(out)


def _role(match: re.Match) -> str:
    name = match.group(2).strip()
    return f"`{name.rsplit('.', 1)[-1] if match.group(1) else name}`"


class ReSTToMarkdown(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _tables(_ROLE.sub(_role, _EXAMPLE.sub(r"\1Examples:", obj.docstring.value)))
