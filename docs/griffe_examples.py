"""Griffe extension for the API pages: the library's docstrings head doctest sections ``Example:``;
griffe's Google parser knows only ``Examples:``, and would render the doctest lines as Markdown
(``[f(x) for x in xs]`` then reads as a link). This renames the header before the docstring is parsed.
"""

from __future__ import annotations

import re

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:\s*$", re.MULTILINE)


class ExampleSections(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _EXAMPLE.sub(r"\1Examples:", obj.docstring.value)
