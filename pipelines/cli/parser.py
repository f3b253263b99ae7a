"""The `fleet` command line: subcommands, their options, and the checks every value passes on the way in."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import sys
from typing import NoReturn

from pipelines.cli import analyst, data, model, recommend, waste
from pipelines.lib.exit_codes import ExitCode
from pipelines.lib.preflight import is_finite_or_text


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error (what is wrong, where to read more) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        # "argument --start: '2026-13-01' is not a date" reads as "--start '2026-13-01' is not a date"
        message = re.sub(r"^argument (\S+): (?=')", r"\1 ", message).removeprefix("argument ")
        print(f"{self.prog}: {message}; see `{self.prog} --help`", file=sys.stderr)
        raise SystemExit(ExitCode.USAGE)


def day(text: str) -> str:
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


def build_parser() -> argparse.ArgumentParser:
    workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    workers_help = f"days run at once, as concurrent Dagster runs (default {workers}: one per core)"
    p = Parser(prog="fleet", description="Fleet telemetry analytics for recommendation-model training.")
    sub = p.add_subparsers(dest="command", required=True)
    home_help = "data home (default $FLEET_HOME or ./data)"
    broker_help = "the workers' Redis broker, redis://HOST:PORT/DB (default $FLEET_BROKER)"

    d = sub.add_parser("demo", help="synthesise a fleet into the data home and materialise every asset")
    d.add_argument("--home", help=home_help)
    d.add_argument(
        "--source",
        choices=("synthetic", "prometheus"),
        default="synthetic",
        help="where the demo's data comes from (default synthetic); prometheus: the fleet backfilled into a "
        "local Prometheus (needs prometheus and promtool) and pulled from it, "
        f"{data.PROM_DEMO_DAYS} days x {data.PROM_DEMO_RUNS} runs unless given",
    )
    d.add_argument("--days", type=at_least_one, help=f"days ending yesterday, UTC (default {data.DEMO_DAYS})")
    d.add_argument(
        "--runs-per-day", type=at_least_one, help=f"training runs per day (default {data.DEMO_RUNS_PER_DAY})"
    )
    d.add_argument("--seed", type=int, default=data.DEMO_SEED, help=f"random seed (default {data.DEMO_SEED})")
    d.add_argument("--workers", type=at_least_one, default=workers, help=workers_help)
    d.set_defaults(func=data.cmd_demo)

    s = sub.add_parser("synth", help="write synthetic landing files (same seed and days, same bytes)")
    s.add_argument(
        "--days", type=at_least_one, default=data.DEMO_DAYS, help=f"days to write (default {data.DEMO_DAYS})"
    )
    s.add_argument(
        "--start", type=day, help="first day YYYY-MM-DD (default: the --days days that ended yesterday, UTC)"
    )
    s.add_argument(
        "--runs-per-day",
        type=at_least_one,
        default=data.DEMO_RUNS_PER_DAY,
        help=f"training runs per day (default {data.DEMO_RUNS_PER_DAY})",
    )
    s.add_argument("--seed", type=int, default=data.DEMO_SEED, help=f"random seed (default {data.DEMO_SEED})")
    s.add_argument("--out", help="landing root (default <data home>/landing)")
    s.add_argument("--source", default="synthetic", help="landing source folder name (default synthetic)")
    s.add_argument(
        "--format",
        choices=("jsonl", "csv", "parquet", "openmetrics"),
        default="jsonl",
        help="file format (default jsonl); openmetrics: the fleet as node_exporter, dcgm-exporter, "
        "kube-state-metrics and pcm-sensor-server would expose it, with timestamps",
    )
    s.add_argument("--gzip", action="store_true", help="gzip jsonl/csv files")
    s.add_argument(
        "--truth",
        action="store_true",
        help="also write the sampler's truth of the waste it made (stragglers, hot shards, servers each run "
        "needs) beside the landing root, in truth/; never ingested",
    )
    s.add_argument("--json", action="store_true", help="print counts and file paths as JSON")
    s.add_argument("--home", help=home_help + "; its catalog/ extends the built-in hardware and models")
    s.set_defaults(func=data.cmd_synth)

    r = sub.add_parser(
        "run",
        help="materialise every asset for landing days that changed; with --from/--to, a backfill of that "
        "range",
    )
    r.add_argument("--home", help=home_help)
    r.add_argument(
        "--from", dest="date_from", type=day, help="first day YYYY-MM-DD (default: every day in landing/)"
    )
    r.add_argument("--to", dest="date_to", type=day, help="last day YYYY-MM-DD (default: --from)")
    r.add_argument("--workers", type=at_least_one, default=workers, help=workers_help)
    r.add_argument(
        "--executor",
        choices=("in_process", "celery"),
        help="where the days run: in processes here (in_process, the default) or on `fleet worker`s "
        "(celery; the merge still runs here); default $FLEET_EXECUTOR or in_process",
    )
    r.add_argument("--broker", help=broker_help)
    r.add_argument(
        "--force",
        action="store_true",
        help="redo every day, also those whose landing files, code and catalogs did not change since a "
        "successful run of theirs (skipped by default, each named)",
    )
    r.set_defaults(func=data.cmd_run)

    wk = sub.add_parser(
        "worker",
        help="run day runs sent by `fleet run --executor celery` (or the Dagster UI on a Celery run "
        "launcher), until stopped",
    )
    wk.add_argument("--broker", help=broker_help)
    wk.add_argument(
        "--concurrency", type=at_least_one, default=1, help="days at once (default 1: a day uses every core)"
    )
    wk.add_argument("--name", default="fleet@%h", help="the worker's name (default fleet@%%h: this host)")
    wk.set_defaults(func=data.cmd_worker)

    i = sub.add_parser(
        "ingest", help="ingest landing files (or deliver a folder, or adapt a public trace) with a summary"
    )
    i.add_argument(
        "path",
        nargs="?",
        help="a folder in the landing layout <source>/<day>/<file> (Prometheus exports too), "
        "or a public trace folder",
    )
    i.add_argument(
        "--source",
        choices=("pai", "mlperf", "prometheus"),
        help="adapt that public trace found at PATH; prometheus: pull from --url "
        "(or deliver exports found at PATH)",
    )
    i.add_argument("--url", help="--source prometheus: the server, e.g. http://prometheus:9090")
    i.add_argument(
        "--mapping",
        help="--source prometheus: a mapping file (schemas/catalog/prometheus.yaml documents it); "
        "checked, then kept as <data home>/catalog/prometheus.yaml",
    )
    i.add_argument(
        "--page-minutes",
        type=at_least_one,
        default=120,
        help="--url: minutes of samples per request (default 120; lower it if the server refuses a page)",
    )
    i.add_argument("--home", help=home_help)
    i.add_argument("--from", dest="date_from", type=day, help="first landing day to (re)ingest YYYY-MM-DD")
    i.add_argument("--to", dest="date_to", type=day, help="last landing day YYYY-MM-DD")
    i.set_defaults(func=data.cmd_ingest)

    c = sub.add_parser(
        "calibrate", help="print every calibration target with the model's value and PASS/FAIL"
    )
    c.add_argument("--json", action="store_true", help="every target and coefficient as JSON")
    c.add_argument(
        "--fit",
        action="store_true",
        help="fit the shared coefficients to the data home's observed runs, with their "
        "leave-one-platform-out error, and store the fit there (whatif and recommend then use it)",
    )
    c.add_argument("--home", help=home_help)
    c.set_defaults(func=model.cmd_calibrate)

    w = sub.add_parser("whatif", help="ask the workload model about a configuration or a sweep")
    w.add_argument("--model", help="a model of the catalog, e.g. M1prod")
    w.add_argument("--config", help="a workload as YAML or JSON (runs contract workload fields)")
    w.add_argument("--run", help="the workload of an observed run (run_id in the lake)")
    w.add_argument(
        "--platform", required=True, type=names, help="platform key(s), comma-separated: cpu,big_basin,zion"
    )
    w.add_argument(
        "--placement", help="gpu_hbm | system_memory | remote_ps | hybrid (default: every placement)"
    )
    w.add_argument(
        "--set",
        action="append",
        type=setting,
        metavar="FIELD=VALUE",
        help="override a workload or system field",
    )
    w.add_argument("--servers", type=at_least_one, metavar="N", help="trainer servers (= --set n_trainers=N)")
    w.add_argument(
        "--sweep",
        type=sweep,
        metavar="FIELD=V1,V2,...",
        help="sweep one field (also n_trainers, the server count, and gpus, GPUs per server)",
    )
    w.add_argument("--home", help=home_help)
    w.add_argument("--json", action="store_true", help="the answer as JSON records")
    w.set_defaults(func=model.cmd_whatif)

    rc = sub.add_parser("recommend", help="rank every platform x placement for a workload")
    rc.add_argument("--model", help="a model of the catalog, e.g. M3prod")
    rc.add_argument("--config", help="a workload as YAML or JSON (runs contract workload fields)")
    rc.add_argument("--run", help="the workload of an observed run (run_id in the lake)")
    rc.add_argument(
        "--set",
        action="append",
        type=setting,
        metavar="FIELD=VALUE",
        help="override a workload field, a server count or gpus (GPUs per server)",
    )
    rc.add_argument(
        "--servers",
        type=at_least_one,
        metavar="N",
        help="trainer servers of every option (= --set n_trainers=N)",
    )
    rc.add_argument(
        "--objective",
        choices=("throughput", "perf_per_watt"),
        default="throughput",
        help="what 'best' means (default throughput)",
    )
    rc.add_argument(
        "--platforms", type=names, help="restrict to these platforms, comma-separated (e.g. cpu,big_basin)"
    )
    rc.add_argument("--home", help=home_help)
    rc.add_argument("--json", action="store_true", help="the workload and every option as JSON")
    rc.set_defaults(func=recommend.cmd_recommend)

    q = sub.add_parser("query", help="list the canned analyst queries, or run one")
    q.add_argument("name", nargs="?", help="a canned query of sql/queries/ (default: list them)")
    q.add_argument(
        "--param", action="append", type=param, metavar="NAME=VALUE", help="override a parameter (repeatable)"
    )
    q.add_argument("--home", help=home_help)
    q.add_argument("--json", action="store_true", help="rows as a JSON list of objects")
    q.set_defaults(func=analyst.cmd_query)

    sq = sub.add_parser(
        "sql",
        help="a read-only SQL shell over the analyst catalog (DuckDB 2; the duckdb CLI of the package "
        "registries is 1.x and cannot open it)",
    )
    sq.add_argument("-c", dest="command_text", metavar="SQL", help="run these statements and exit")
    sq.add_argument("--home", help=home_help)
    sq.set_defaults(func=analyst.cmd_sql)

    rp = sub.add_parser("report", help="write the HTML report and every chart as PNG and SVG")
    rp.add_argument("--out", help="folder (default <data home>/reports)")
    rp.add_argument(
        "--from", dest="date_from", type=day, help="first day YYYY-MM-DD (default: the first in the lake)"
    )
    rp.add_argument(
        "--to", dest="date_to", type=day, help="last day YYYY-MM-DD (default: the last in the lake)"
    )
    rp.add_argument("--home", help=home_help)
    rp.set_defaults(func=analyst.cmd_report)

    ws = sub.add_parser(
        "waste", help="where the fleet wastes machines: servers and kW to win back, top runs, outliers"
    )
    ws.add_argument(
        "--from", dest="date_from", type=day, help="first day YYYY-MM-DD (default: the first in the lake)"
    )
    ws.add_argument(
        "--to", dest="date_to", type=day, help="last day YYYY-MM-DD (default: the last in the lake)"
    )
    ws.add_argument(
        "--target",
        type=fraction,
        help="p95 utilisation target to right-size against (default: what the nightly run used, 0.8); "
        "recomputed from the stored per-day aggregates",
    )
    ws.add_argument("--top", type=at_least_one, default=10, help="runs to list (default 10)")
    ws.add_argument("--home", help=home_help)
    ws.add_argument("--json", action="store_true", help="totals, tables and runs as JSON")
    ws.set_defaults(func=waste.cmd_waste)

    u = sub.add_parser("ui", help="start the Dagster UI on the data home's instance")
    u.add_argument("--home", help=home_help)
    u.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    u.add_argument("--port", type=int, default=3000, help="port (default 3000)")
    u.set_defaults(func=analyst.cmd_ui)
    return p
