"""The `fleet` command. One module per group of subcommands; this one checks what the user handed over and
maps outcomes to exit codes (pipelines/lib/exit_codes.py): 0 done, 2 a user error (one line: what is wrong,
how to fix it), 1 a failure of the machine (disk full, lake unwritable), with its cause."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipelines.cli.hints import runnable
from pipelines.lib.errors import Unavailable, UsageError
from pipelines.lib.exit_codes import ExitCode
from pipelines.lib.operations.preflight import (
    STAGED_NOTHING_KEPT,
    check_home,
    check_lake,
    check_user_catalogs,
    check_workload_config,
    disk_full,
)
from pipelines.lib.paths import DataHome


def prepare(args: argparse.Namespace) -> None:
    """Resolve the data home once (explicit from here on) and check every input before work starts: what
    the subcommand declares it needs (``args.spec``: pipelines/cli/args.py), then its own check."""
    needs = args.spec.needs
    if "home" in args:
        args.home_given = args.home  # printed hints repeat it as the user typed it
        home = DataHome.resolve(args.home)
        check_home(home)
        args.home = str(home.root)
        if needs.user_catalog:
            check_user_catalogs(home, lenient=needs.lenient_catalog)
        if needs.lake:
            check_lake(home)
        if args.spec.check is not None:
            args.spec.check(args, home)
    if getattr(args, "config", None):
        check_workload_config(Path(args.config))


def main(argv: list[str] | None = None) -> int:
    """Run one `fleet` subcommand; returns the exit status."""
    from pipelines.cli.parser import build_parser

    args = build_parser().parse_args(argv)
    try:
        prepare(args)
        return int(args.func(args) or ExitCode.DONE)
    except UsageError as exc:
        print(f"fleet {args.command}: {runnable(str(exc), args)}", file=sys.stderr)
        return ExitCode.USAGE
    except Unavailable as exc:
        print(f"fleet {args.command}: {runnable(str(exc), args)}", file=sys.stderr)
        return getattr(exc, "exit_code", ExitCode.FAILED)
    except OSError as exc:
        full = _disk_full(exc, args)
        where = exc.filename or getattr(args, "home", None) or "the data home"
        print(f"fleet {args.command}: {full or f'{exc.strerror or exc} ({where})'}", file=sys.stderr)
        return ExitCode.FAILED
    except Exception as exc:  # a full disk reaches us wrapped (Dagster's step error, SQLite's storage)
        full = _disk_full(exc, args)
        if full is None:
            raise
        print(f"fleet {args.command}: {full}", file=sys.stderr)
        return ExitCode.FAILED


def _disk_full(exc: BaseException, args: argparse.Namespace) -> str | None:
    then = STAGED_NOTHING_KEPT if args.spec.needs.stages_days else ""
    return disk_full(exc, Path(getattr(args, "home", None) or "."), then)
