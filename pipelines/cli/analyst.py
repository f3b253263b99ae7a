"""`fleet query`, `fleet report`, `fleet ui`: the analyst's ways into what the pipeline published."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

from pipelines.cli.args import Command, Needs, add_days_range, add_home, param
from pipelines.lib.errors import UsageError
from pipelines.lib.exit_codes import ExitCode
from pipelines.lib.operations.preflight import check_catalog_readable, check_query_params
from pipelines.lib.paths import HOME_ENV, PROJECT_ROOT, DataHome


def cmd_query(args: argparse.Namespace) -> int:
    """List the canned analyst queries, or run one read-only against the catalog."""
    from pipelines.lib.query import queries
    from pipelines.lib.storage import lake

    if not args.name:
        for q in queries.canned().values():
            params = ", ".join(f"{k}={v}" for k, v in q.defaults.items())
            print(f"{q.name:<34} {q.description}" + (f"  [{params}]" if params else ""))
        return ExitCode.DONE
    home = DataHome.resolve(args.home)
    try:
        params = dict(p.split("=", 1) for p in args.param or [])
        frame = queries.run(home.catalog_path, args.name, params, store=lake.store(home))
    except (KeyError, ValueError) as exc:
        print(f"fleet query: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return ExitCode.USAGE
    from pipelines.lib.query.render import json_records, plain_table

    print(json_records(frame) if args.json else plain_table(frame))
    return ExitCode.DONE


def cmd_sql(args: argparse.Namespace) -> int:
    """A read-only SQL shell over the analyst catalog (DuckDB 2): ``-c SQL``, SQL on standard input, or an
    interactive prompt."""
    from pipelines.lib.query import sqlshell
    from pipelines.lib.storage import lake

    home = DataHome.resolve(args.home)
    con = sqlshell.connect(home.catalog_path, lake.store(home))
    try:
        if args.command_text is None and sys.stdin.isatty():
            print(f"{home.catalog_path} (read-only). Statements end with ';'; .tables lists the views; .quit")
            import readline  # noqa: F401 - line editing and history for input()

            sqlshell.interactive(con, input, print)
            return ExitCode.DONE
        text = args.command_text if args.command_text is not None else sys.stdin.read()
        try:
            for out in sqlshell.run(con, text):
                print(out)
        except sqlshell.SqlError as exc:
            print(f"fleet sql: {exc}", file=sys.stderr)
            return ExitCode.USAGE
        return ExitCode.DONE
    finally:
        con.close()


def cmd_report(args: argparse.Namespace) -> int:
    """Write the HTML report and every chart as PNG and SVG from the lake's aggregated tables."""
    from dashboards.report import days_with_runs, write_report

    home = DataHome.resolve(args.home)
    out = Path(args.out).resolve() if args.out else home.reports
    every = days_with_runs(home)
    if not every:
        raise UsageError(
            f"no runs in {home.lake_uri}; run `fleet demo`, or `fleet run` after delivering data"
        )
    if not days_with_runs(home, args.date_from, args.date_to):
        print(
            f"fleet report: no runs from {args.date_from or 'the first day'} to {args.date_to or 'the last'} "
            f"in {home.lake_uri} (it holds runs of {every[0]} .. {every[-1]}); nothing written",
            file=sys.stderr,
        )
        return ExitCode.USAGE
    start = time.perf_counter()
    try:
        art = write_report(home, out, args.date_from, args.date_to)
    except OSError as exc:
        print(f"fleet report: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return ExitCode.FAILED
    print(
        f"report: {art.html}\n"
        f"charts: {len(art.pngs)} PNG and {len(art.svgs)} SVG in {art.html.parent / 'charts'} "
        f"({time.perf_counter() - start:.1f} s)"
    )
    return ExitCode.DONE


def _location_name() -> str:
    """The code location's name, as `dagster dev` reads it from pyproject.toml."""
    with open(PROJECT_ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["dg"]["project"]["code_location_name"]


def cmd_ui(args: argparse.Namespace) -> int:
    """`dagster dev` on the demo's instance, stoppable with Ctrl-C or SIGTERM."""
    from pipelines.nightly import JOB
    from pipelines.orchestrate import ensure_instance
    from pipelines.runs import fail_dead_runs

    home = DataHome.resolve(args.home)
    instance = ensure_instance(home)
    dead = fail_dead_runs(instance)  # before the daemon counts them against the run limit
    if dead:
        print(f"marked {len(dead)} run(s) of killed processes failed: {', '.join(dead)}")
    dagster_home = instance.root_directory
    _skip_welcome(dagster_home)
    cmd = [str(Path(sys.executable).with_name("dagster")), "dev", "-h", args.host, "-p", str(args.port)]
    url = f"http://{args.host}:{args.port}"
    print(
        f"Dagster UI on {url} (DAGSTER_HOME={dagster_home})\n"
        # The asset catalog's lineage opens with its groups folded; the job's page shows every asset.
        f"the night's assets, every group open: {url}/locations/{_location_name()}/jobs/{JOB}",
        flush=True,
    )
    # dagster dev runs in a process group of its own (webserver, daemon, code server): stopping `fleet ui`
    # stops the whole group. A shell without job control starts us with SIGINT ignored; dagster dev would
    # then ignore SIGTERM too, so the child's handlers are reset.
    proc = subprocess.Popen(
        cmd,
        cwd=PROJECT_ROOT,
        # The code location finds the data home and the instance through these; ours stays untouched.
        env={
            **os.environ,
            HOME_ENV: str(home.root),
            "DAGSTER_HOME": dagster_home,
            "PYTHONWARNINGS": ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), QUIET_SUPERSESSION])),
        },
        start_new_session=True,
        preexec_fn=lambda: (
            signal.signal(signal.SIGINT, signal.SIG_DFL),
            signal.signal(signal.SIGTERM, signal.SIG_DFL),
        ),
    )
    received: list[int] = []

    def stop(signum: int, _frame) -> None:
        received.append(signum)
        raise _Stop

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        return proc.wait()
    except _Stop:
        print("stopping the Dagster UI ...", flush=True)
        _stop_group(proc)
        return 128 + received[0]


# `dagster dev` warns on every start that it is superseded by `dg dev` (a CLI package the product does
# not need); the operator can do nothing about it, so this one warning is not shown.
QUIET_SUPERSESSION = "ignore:Function `dev_command` is superseded:FutureWarning"


def _skip_welcome(dagster_home: str) -> None:
    """Mark the instance's "Join the Dagster community" dialog as seen, so the UI opens on the graph: the
    UI shows it until a file .nux/nux.yaml exists in the instance's folder."""
    from pipelines.lib import fileio

    fileio.write_text(Path(dagster_home) / ".nux" / "nux.yaml", "seen: 1\n")


class _Stop(Exception):
    """SIGTERM or SIGINT reached `fleet ui`."""


UI_STOP_GRACE_S = 30


def _stop_group(proc: subprocess.Popen) -> None:
    """SIGINT to dagster dev's process group (it shuts its servers down), SIGKILL to whatever is left of
    the group after UI_STOP_GRACE_S."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second signal must not cut the shutdown short
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    group = proc.pid
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGINT)
    deadline = time.monotonic() + UI_STOP_GRACE_S
    while time.monotonic() < deadline:
        proc.poll()
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)
    proc.wait()


def _query_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="a canned query of sql/queries/ (default: list them)")
    p.add_argument(
        "--param", action="append", type=param, metavar="NAME=VALUE", help="override a parameter (repeatable)"
    )
    add_home(p)
    p.add_argument("--json", action="store_true", help="rows as a JSON list of objects")


def _check_query(args: argparse.Namespace, home: DataHome) -> None:
    """A canned query's parameters, and the catalog it reads, before it runs."""
    from pipelines.lib.query import queries

    known = queries.canned()
    if args.name in known:
        params = dict(p.split("=", 1) for p in args.param or [])
        check_query_params(known[args.name], params)
        check_catalog_readable(home.catalog_path)


def _sql_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", dest="command_text", metavar="SQL", help="run these statements and exit")
    add_home(p)


def _report_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", help="folder (default <data home>/reports)")
    add_days_range(p)
    add_home(p)


def _ui_arguments(p: argparse.ArgumentParser) -> None:
    add_home(p)
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=3000, help="port (default 3000)")


COMMANDS = (
    Command(
        "query",
        "list the canned analyst queries, or run one",
        _query_arguments,
        cmd_query,
        Needs(lake=True),
        check=_check_query,
    ),
    Command(
        "sql",
        "a read-only SQL shell over the analyst catalog (DuckDB 2; the duckdb CLI of the package registries "
        "is 1.x and cannot open it)",
        _sql_arguments,
        cmd_sql,
        Needs(lake=True),
        check=lambda _args, home: check_catalog_readable(home.catalog_path),
    ),
    Command(
        "report",
        "write the HTML report and every chart as PNG and SVG",
        _report_arguments,
        cmd_report,
        Needs(lake=True),
    ),
    Command("ui", "start the Dagster UI on the data home's instance", _ui_arguments, cmd_ui),
)
