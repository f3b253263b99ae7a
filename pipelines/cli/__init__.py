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
from pipelines.lib.paths import DataHome
from pipelines.lib.preflight import (
    STAGED_NOTHING_KEPT,
    check_catalog_readable,
    check_home,
    check_lake,
    check_query_params,
    check_user_catalogs,
    check_workload_config,
    disk_full,
)

# Subcommands that read the data home's own hardware and model catalogs (catalog/*.yaml); the planning
# ones leave an invalid entry out (naming it) and use the others.
USES_USER_CATALOG = {"demo", "synth", "run", "ingest", "whatif", "recommend", "waste"}
PLANNING = {"whatif", "recommend"}
# Subcommands that stage days before promoting them into the lake.
STAGES_DAYS = {"demo", "run", "ingest"}
# Subcommands that read or write the lake.
USES_LAKE = {"demo", "run", "ingest", "recommend", "waste", "report", "query", "sql"}


def prepare(args: argparse.Namespace) -> None:
    """Resolve the data home once (explicit from here on) and check every input before work starts."""
    if "home" in args:
        args.home_given = args.home  # printed hints repeat it as the user typed it
        home = DataHome.resolve(args.home)
        check_home(home)
        args.home = str(home.root)
        if args.command in USES_USER_CATALOG:
            check_user_catalogs(home, lenient=args.command in PLANNING)
        if args.command in USES_LAKE:
            check_lake(home)
        if args.command == "query" and args.name:
            _check_query(args, home)
        if args.command == "sql":
            check_catalog_readable(home.catalog_path)
    if getattr(args, "config", None):
        check_workload_config(Path(args.config))


def _check_query(args: argparse.Namespace, home: DataHome) -> None:
    from pipelines.lib import queries

    known = queries.canned()
    if args.name in known:
        params = dict(p.split("=", 1) for p in args.param or [])
        check_query_params(known[args.name], params)
        check_catalog_readable(home.catalog_path)


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
    then = STAGED_NOTHING_KEPT if args.command in STAGES_DAYS else ""
    return disk_full(exc, Path(getattr(args, "home", None) or "."), then)
