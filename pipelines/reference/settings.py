"""reference/settings.md: every setting of a deployment, from the records pipelines/lib/settings.py resolves
them with (variable, flag, default, meaning)."""

from __future__ import annotations

from pipelines.lib import settings
from pipelines.lib.settings import Setting
from pipelines.reference.md import cell, code, page, size, table

INTRO = """\
Every setting is resolved once into one typed object (`pipelines/lib/settings.py`): the flag first (where
the command has it), then the environment variable, then the default. A bad value stops the command with one
line naming the variable and what it expects (exit 2). Generated from the settings' records when the site is
built (`pipelines/reference/settings.py`)."""
HEADER = ("environment", "flag", "default", "meaning")


def default(s: Setting) -> str:
    """The default as the page shows it: in words where the record gives them, else the value (bytes also
    in binary units, seconds with their unit)."""
    if s.shown_default:
        return cell(s.shown_default) if s.shown_default.startswith("(") else code(s.shown_default)
    if s.unit == "bytes":
        return size(s.default)
    if s.unit == "s":
        return f"{s.default:g} s"
    return f"{s.default:,}" if isinstance(s.default, int) else code(s.default)


def _least(s: Setting) -> str:
    """The least value a limit takes (``settings.LEAST``), as a sentence."""
    field = next((k for k, v in settings.LIMITS.items() if v is s), None)
    least = settings.LEAST.get(field or "")
    return f" At least {least:,}." if least else ""


def _row(s: Setting) -> list[str]:
    return [code(s.env), code(s.flag) if s.flag else "", default(s), cell(s.meaning + _least(s))]


def markdown() -> str:
    limits = list(settings.LIMITS.values())
    deployment = [s for s in settings.SETTINGS if s not in limits]
    return page(
        "Settings",
        INTRO,
        "## Deployment\n\n" + table(HEADER, map(_row, deployment)),
        "## Ingest limits\n\nWhat one landing file may do to the ingest, and how a big day is read "
        "(bytes and counts as whole numbers; `_` may group digits).\n\n" + table(HEADER, map(_row, limits)),
    )
