"""What a `fleet` subcommand declares where it is defined: its arguments, what it needs checked before it
runs (the data home's catalogs, the lake), and the checks every value passes on the way in."""

from __future__ import annotations

import argparse
import datetime as dt
import os
from collections.abc import Callable
from dataclasses import dataclass

from pipelines.lib.operations.preflight import is_finite_or_text
from pipelines.lib.paths import DataHome

HOME_HELP = "data home (default $FLEET_HOME or ./data)"
BROKER_HELP = "the workers' Redis broker, redis://HOST:PORT/DB (default $FLEET_BROKER)"


@dataclass(frozen=True)
class Needs:
    """What `fleet` checks before a subcommand runs (pipelines/cli/__init__.py: prepare)."""

    user_catalog: bool = False  # reads the data home's own hardware and model catalogs (catalog/*.yaml)
    lenient_catalog: bool = False  # ... and leaves an invalid entry out (naming it), using the others
    lake: bool = False  # reads or writes the lake
    stages_days: bool = False  # stages days before promoting them (a full disk keeps nothing staged)


@dataclass(frozen=True)
class Command:
    """One subcommand: its name and one-line help, the arguments it declares, what runs it, what it needs."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int | None]
    needs: Needs = Needs()
    check: Callable[[argparse.Namespace, DataHome], None] | None = None  # its own, after the home's checks


def add_home(p: argparse.ArgumentParser, more: str = "") -> None:
    p.add_argument("--home", help=HOME_HELP + more)


def add_workers(p: argparse.ArgumentParser) -> None:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    p.add_argument(
        "--workers",
        type=at_least_one,
        default=cores,
        help=f"days run at once, as concurrent Dagster runs (default {cores}: one per core)",
    )


def add_days_range(p: argparse.ArgumentParser) -> None:
    """--from and --to over the days in the lake."""
    p.add_argument(
        "--from", dest="date_from", type=iso_day, help="first day YYYY-MM-DD (default: the first in the lake)"
    )
    p.add_argument(
        "--to", dest="date_to", type=iso_day, help="last day YYYY-MM-DD (default: the last in the lake)"
    )


def iso_day(text: str) -> str:
    """A calendar day YYYY-MM-DD."""
    try:
        dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date YYYY-MM-DD (e.g. 2026-11-20)") from None
    return text


def at_least_one(text: str) -> int:
    """A whole number >= 1."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return n


def names(text: str) -> str:
    """A comma-separated list with at least one name."""
    if not [p for p in text.split(",") if p.strip()]:
        raise argparse.ArgumentTypeError(f"{text!r} names nothing; give one or more, comma-separated")
    return text


def setting(text: str) -> str:
    """FIELD=VALUE; the model checks the field and the type, here only that a number is finite."""
    key, _, value = text.partition("=")
    if not is_finite_or_text(value.strip()):
        raise argparse.ArgumentTypeError(f"{text!r}: {key.strip()} must be a finite number")
    return text


def sweep(text: str) -> str:
    """FIELD=V1,V2,... with at least one value, each finite."""
    key, eq, values = text.partition("=")
    items = [v for v in values.split(",") if v.strip()]
    if not eq or not items:
        raise argparse.ArgumentTypeError(f"{text!r}: expected FIELD=V1,V2,... with at least one value")
    for v in items:
        setting(f"{key}={v}")
    return text


def param(text: str) -> str:
    """NAME=VALUE for a canned query."""
    if "=" not in text or not text.partition("=")[0].strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE (e.g. --param source=pai)")
    return text


def fraction(text: str) -> float:
    """A number in (0, 1]."""
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number in (0, 1] (e.g. 0.8)")
    return v
