"""Griffe extension for the API pages: two reST habits of the library's docstrings, made Markdown.

- Doctest sections are headed ``Example:``; griffe's Google parser knows only ``Examples:`` and would
  render the doctest lines as Markdown (``[f(x) for x in xs]`` then reads as a link).
- Sphinx roles (``:func:`~faithgrpo.rewards.calver.score_trace```) become code spans (``score_trace``).

Only the rendered text changes; the docstrings in the sources stay as they are.
"""

from __future__ import annotations

import re

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:\s*$", re.MULTILINE)
_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|obj|exc|const):`(~?)([^`<]+?)(?:\s*<[^>]*>)?`")


def _role(match: re.Match) -> str:
    name = match.group(2).strip()
    return f"`{name.rsplit('.', 1)[-1] if match.group(1) else name}`"


class ReSTToMarkdown(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_role, _EXAMPLE.sub(r"\1Examples:", obj.docstring.value))
