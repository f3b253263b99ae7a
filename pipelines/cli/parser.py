"""The `fleet` command line: the subcommands each module declares (pipelines/cli/args.py: Command), in one
parser whose errors are one line."""

from __future__ import annotations

import argparse
import re
import sys
from typing import NoReturn

from pipelines.cli import analyst, data, model, recommend, waste
from pipelines.cli.args import Command
from pipelines.lib.exit_codes import ExitCode


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error (what is wrong, where to read more) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        # "argument --start: '2026-13-01' is not a date" reads as "--start '2026-13-01' is not a date"
        message = re.sub(r"^argument (\S+): (?=')", r"\1 ", message).removeprefix("argument ")
        print(f"{self.prog}: {message}; see `{self.prog} --help`", file=sys.stderr)
        raise SystemExit(ExitCode.USAGE)


# The order of `fleet --help` and of the reference page.
ORDER = (
    "demo", "synth", "run", "worker", "ingest", "calibrate", "whatif", "recommend", "query", "sql", "report",
    "waste", "ui",
)  # fmt: skip


def commands() -> dict[str, Command]:
    """Every subcommand, as its module declares it, in ORDER."""
    declared = {c.name: c for m in (data, model, recommend, analyst, waste) for c in m.COMMANDS}
    if sorted(declared) != sorted(ORDER):
        raise RuntimeError(f"declared subcommands {sorted(declared)} are not those of ORDER {sorted(ORDER)}")
    return {name: declared[name] for name in ORDER}


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="fleet", description="Fleet telemetry analytics for recommendation-model training.")
    sub = p.add_subparsers(dest="command", required=True)
    for c in commands().values():
        cp = sub.add_parser(c.name, help=c.help)
        c.arguments(cp)
        cp.set_defaults(func=c.run, spec=c)
    return p
