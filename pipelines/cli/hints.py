"""Commands printed for the user to run next, written as they can run them: the `fleet` they started (the
bare name when that one is on PATH, else the path they typed, such as .venv/bin/fleet after `make demo`)
and the --home they gave."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

# `fleet worker` has no data home; every other subcommand takes --home.
WITHOUT_HOME = {"worker"}
_MENTION = re.compile(r"`fleet ([a-z]+)([^`]*)`")


def _shown(path: str) -> str:
    """``path`` relative to the working directory when it lies below it (symlinks kept: a venv's python
    must stay the venv's)."""
    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute)
    return relative if not relative.startswith("..") else absolute


def program(argv0: str | None = None) -> str:
    """How to start `fleet` again the way this process was started (called from another program: by its
    name)."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    path = Path(argv0)
    if path.name == "fleet":
        found = shutil.which("fleet")
        if found and Path(found).resolve() == path.resolve():
            return "fleet"
        shown = _shown(argv0)
        return shlex.quote(shown if "/" in shown else "./" + shown)
    if path.parts[-3:] == ("pipelines", "cli", "__main__.py"):  # python -m pipelines.cli
        return f"{shlex.quote(_shown(sys.executable))} -m pipelines.cli"
    return "fleet"


def command(args: argparse.Namespace | None, sub: str, *rest: str) -> str:
    """`fleet <sub> [--home H] <rest>` as the user can run it, in backticks."""
    words = [program(), sub]
    given = getattr(args, "home_given", None)
    if given and sub not in WITHOUT_HOME:
        words += ["--home", shlex.quote(given)]
    return "`" + " ".join([*words, *rest]) + "`"


def runnable(text: str, args: argparse.Namespace | None) -> str:
    """``text`` with each `fleet <sub> ...` it mentions written as the user can run it."""
    return _MENTION.sub(lambda m: command(args, m.group(1), *m.group(2).split()), text)
