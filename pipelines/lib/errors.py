"""The two kinds of failure a command reports in one line: the user's mistake (exit 2) and a hold-up outside
the user's input (exit 1). Modules raise subclasses of these; the CLI maps them to exit codes."""

from __future__ import annotations


class UsageError(ValueError):
    """A user's mistake, not a failure of the machine; the message says what is wrong and how to fix it."""


class Unavailable(RuntimeError):
    """The command could not do its job for a reason outside the user's input (exit 1): the message says
    what held it up and what to do."""
