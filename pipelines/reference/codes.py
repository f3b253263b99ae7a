"""reference/exit-codes.md and reference/reason-codes.md: the `fleet` command's exit statuses (from
pipelines/lib/exit_codes.py) and the quarantine's reason codes (from the quarantine contract, where each
code's meaning is declared)."""

from __future__ import annotations

from pipelines.lib.contracts import contract
from pipelines.lib.exit_codes import ExitCode
from pipelines.reference.md import cell, code, page, table

EXIT_INTRO = """\
What a `fleet` command's exit status says. Whatever the command, an error is reported on standard error
in one line that says what is wrong (and, for a user error, how to fix it). `--help` exits 0. Generated from
`pipelines/lib/exit_codes.py` when the site is built (`pipelines/reference/codes.py`)."""
REASON_INTRO = """\
Why a landing row or file was quarantined: column `reason_code` of table
[`quarantine`](tables.md#quarantine), with the original record, where it came from and a message saying
what to fix. A file fault quarantines the whole file (one entry, `row_number` 0, none of its rows
accepted); a row fault one row, the file's other rows going on. Generated from the quarantine contract
(`schemas/quarantine.yaml`, `enum_descriptions`) when the site is built (`pipelines/reference/codes.py`)."""


def exit_codes() -> str:
    rows = [[str(int(c)), code(c.name.lower()), cell(c.__doc__)] for c in ExitCode]
    return page("Exit codes", EXIT_INTRO, table(("status", "name", "meaning"), rows))


def reason_codes() -> dict[str, tuple[str, str]]:
    """Each reason code -> (``row`` or ``file``, its meaning), in contract order."""
    col = contract("quarantine").column("reason_code")
    return {r: ("file" if r.startswith("file_") else "row", m) for r, m in col.described_values.items()}


def reasons_page() -> str:
    codes = reason_codes()
    parts = [REASON_INTRO]
    for kind in ("row", "file"):
        rows = [[code(r), cell(m)] for r, (k, m) in codes.items() if k == kind]
        parts.append(f"## {kind.capitalize()} faults\n\n" + table(("code", "meaning"), rows))
    return page("Reason codes", *parts)
