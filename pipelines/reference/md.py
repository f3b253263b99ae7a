"""Markdown pieces shared by the reference pages: text from the sources made safe for a page or a table cell,
code spans, tables, sizes."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

_CODE_SPAN = re.compile(r"(`+).+?\1")


def _outside_code(text: str, escape) -> str:
    """``escape`` applied to the parts of ``text`` outside code spans (a code span shows its text as is)."""
    out, at = [], 0
    for m in _CODE_SPAN.finditer(text):
        out += [escape(text[at : m.start()]), m.group(0)]
        at = m.end()
    return "".join([*out, escape(text[at:])])


def prose(text: Any) -> str:
    """Source text on one line: ``<`` escaped (``<data home>`` would be read as an HTML tag and vanish) and
    ``*`` (a wildcard such as '*' would start emphasis)."""
    return _outside_code(" ".join(str(text).split()), lambda t: t.replace("<", "&lt;").replace("*", r"\*"))


def cell(text: Any) -> str:
    """``prose`` that also keeps a table row whole: ``|`` escaped outside code spans (inside one, the table
    extension does not split on it, and a backslash would show)."""
    return _outside_code(prose(text), lambda t: t.replace("|", r"\|"))


def code(value: Any) -> str:
    """``value`` as a code span, fenced by more backticks than it holds."""
    text = " ".join(str(value).split())
    ticks = "`" * (max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A markdown table; the cells are markdown already (see ``cell``)."""
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def size(n: int) -> str:
    """A byte count as given and, when whole, in KiB, MiB or GiB: 67,108,864 (64 MiB)."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n:,} ({n >> shift} {unit})"
    return f"{n:,}"


def page(title: str, *parts: str) -> str:
    """A page: its title, then each part separated by a blank line, ending in one newline."""
    return "\n\n".join([f"# {title}", *(p.strip("\n") for p in parts if p)]) + "\n"
