"""The exit statuses of `fleet`, in one place: the commands return these members, and the docs site's
reference page (docs/reference/exit-codes.md) lists them with their docstrings."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What a `fleet` command's exit status says; each member's docstring is its meaning."""

    def __new__(cls, value: int, doc: str) -> ExitCode:
        member = int.__new__(cls, value)
        member._value_ = value
        member.__doc__ = doc
        return member

    DONE = (
        0,
        "The command did its job. `fleet ingest` exits 0 however much it quarantined: the summary it prints "
        "counts the quarantine entries by reason.",
    )
    FAILED = (
        1,
        "A failure of the machine or of the run, not of what the user gave: a full disk, a lake that cannot "
        "be written, the analyst catalog's writer slot held by another run past $FLEET_POOL_WAIT_S, day runs "
        "that failed on workers. The message names the cause. `fleet calibrate` also exits 1 while a "
        "calibration target fails.",
    )
    USAGE = (
        2,
        "A user error: a bad argument, date or value, a malformed workload file or catalog, a data home or "
        "catalog that cannot be used as given. One line on standard error says what is wrong and how to fix "
        "it.",
    )
    STOPPED = (
        143,
        "Stopped by a signal (SIGTERM or SIGINT; 128 + 15, as a shell reports SIGTERM): the days already "
        "written stay, nothing half-done is published; run the command again to finish.",
    )
