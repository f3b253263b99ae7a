"""`fleet synth`, `fleet ingest`, `fleet run`, `fleet demo`: data into the lake, analyses out."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import time
from pathlib import Path

from pipelines.cli.args import BROKER_HELP, Command, Needs, add_home, add_workers, at_least_one, iso_day
from pipelines.cli.hints import command
from pipelines.lib.errors import Unavailable, UsageError
from pipelines.lib.exit_codes import ExitCode
from pipelines.lib.operations.preflight import STAGED_NOTHING_KEPT, disk_full
from pipelines.lib.paths import DataHome
from pipelines.lib.settings import Settings

DEMO_DAYS = 5
DEMO_RUNS_PER_DAY = 110
DEMO_SEED = 2021
PROM_DEMO_DAYS = 2  # fleet demo --source prometheus: a smaller fleet (every CPU is a node_exporter series)
PROM_DEMO_RUNS = 10


def _days(start: str | None, n: int) -> list[str]:
    """``n`` consecutive UTC days from ``start``; by default the ``n`` days that ended yesterday."""
    if n < 1:
        raise UsageError("--days must be at least 1")
    first = dt.date.fromisoformat(start) if start else dt.datetime.now(dt.UTC).date() - dt.timedelta(days=n)
    return [(first + dt.timedelta(days=i)).isoformat() for i in range(n)]


def _span(first: str, last: str) -> list[str]:
    """Every day from ``first`` to ``last`` inclusive (both already checked as YYYY-MM-DD by the parser)."""
    a, b = dt.date.fromisoformat(first), dt.date.fromisoformat(last)
    if b < a:
        raise UsageError(f"--to {last} is before --from {first}; give the first day with --from")
    return [(a + dt.timedelta(days=i)).isoformat() for i in range((b - a).days + 1)]


def synthesize(
    home: DataHome,
    out: Path,
    days: list[str],
    runs_per_day: int,
    seed: int,
    fmt: str,
    source: str = "synthetic",
    gzip_level: int | None = None,
    quiet: bool = False,
    truth: bool = False,
) -> dict:
    """Write a synthetic fleet into landing folder ``out`` from ``home``'s catalogs (with ``truth``, the
    sampler's truth of the waste it made beside it, in truth/); returns counts."""
    from synthetic_fleet.writers import truth_root, write_fleet
    from workload_model.catalog import load_hardware, load_models

    home_catalog = home.user_catalog_dir
    hw, models = load_hardware(home_catalog / "hardware.yaml"), load_models(home_catalog / "models.yaml")
    totals = {"days": len(days), "runs": 0, "samples": 0, "files": []}
    clock = [time.perf_counter()]

    def done(fleet, paths) -> None:
        totals["runs"] += fleet.runs.height
        totals["samples"] += fleet.samples.height
        totals["files"] += [str(p) for p in paths]
        if not quiet:
            i = days.index(fleet.day) + 1
            print(
                f"  [{i}/{len(days)}] {fleet.day}: {fleet.runs.height} runs, "
                f"{fleet.samples.height:,} samples ({time.perf_counter() - clock[0]:.1f} s)",
                flush=True,
            )
        clock[0] = time.perf_counter()

    write_fleet(
        days,
        runs_per_day,
        seed,
        hw,
        models,
        out,
        source=source,
        fmt=fmt,
        gzip_level=gzip_level,
        on_day=done,
        truth=truth,
    )
    if truth:
        totals["truth"] = str(truth_root(out))
    if fmt == "openmetrics":
        totals["mapping"] = str(_install_exporter_mapping(home))
    return totals


def _install_exporter_mapping(home: DataHome) -> Path:
    """The mapping that reads the synthetic exporters back, as the data home's mapping unless it has one."""
    from pipelines.lib import fileio
    from pipelines.lib.ingest.prometheus.mapping import user_file
    from synthetic_fleet.exporters import mapping_yaml

    path = user_file(home)
    if not path.exists():
        fileio.write_bytes(path, mapping_yaml().encode())
    return path


def cmd_synth(args: argparse.Namespace) -> int:
    home = DataHome.resolve(args.home)
    days = _days(args.start, args.days)
    out = Path(args.out).resolve() if args.out else home.landing
    totals = synthesize(
        home,
        out,
        days,
        args.runs_per_day,
        args.seed,
        args.format,
        args.source,
        gzip_level=6 if args.gzip else None,
        quiet=args.json,
        truth=args.truth,
    )
    if args.json:
        print(json.dumps(totals, indent=2))
    else:
        print(f"wrote {totals['runs']} runs and {totals['samples']:,} samples over {len(days)} days to {out}")
        if "mapping" in totals:
            print(
                f"as the exporters would expose them (OpenMetrics); the mapping that reads them back: "
                f"{totals['mapping']} (interval_s must be the fleet's 300 s sampling interval)"
            )
        if args.truth:
            print(f"the sampler's truth (stragglers, hot shards, servers needed) is in {totals['truth']}")
    return ExitCode.DONE


def cmd_run(args: argparse.Namespace, days: list[str] | None = None) -> int:
    from pipelines.lib.ingest.delivery import not_read_warning
    from pipelines.lib.query import queries
    from pipelines.lib.storage import lake
    from pipelines.lib.storage.landing import landing_days
    from pipelines.orchestrate import run_pipeline

    try:
        settings = Settings.resolve(
            args.home, executor=getattr(args, "executor", None), broker=getattr(args, "broker", None)
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    home = settings.home
    if days is None:
        days = landing_days(home)
        if args.date_from:
            landed = set(days)
            days = _span(args.date_from, args.date_to or args.date_from)
            empty = [d for d in days if d not in landed]
            if len(empty) == len(days):
                print(
                    f"fleet: no landing files for {days[0]}..{days[-1]} under {home.landing}; nothing to do",
                    file=sys.stderr,
                )
                return ExitCode.USAGE
            if empty:
                print(f"note: no landing files for {len(empty)} day(s) ({', '.join(empty)}); they stay empty")
    if not days:
        raise UsageError(f"no landing days under {home.landing}; run `fleet synth` or deliver files first")
    print(f"materialising {len(days)} day(s) into {home.root}", flush=True)
    result = run_pipeline(
        home,
        days,
        progress=lambda m: print(m, flush=True),
        workers=args.workers,
        force=getattr(args, "force", False),
        settings=settings,
    )
    summary = queries.run(home.catalog_path, "catalog_totals", store=lake.store(home)).row(0, named=True)
    print(f"\nreport:  {home.report_path}\ncatalog: {home.catalog_path}")
    print(
        f"runs {summary['runs']:,} · samples {summary['samples']:,} · "
        f"quarantined rows {summary['rows_quarantined']:,} · landing files {summary['landing_files']} · "
        f"wall time {result.seconds:.1f} s"
    )
    if result.unchanged:
        print(
            f"skipped {len(result.unchanged)} unchanged day(s): {', '.join(result.unchanged)} "
            f"({command(args, 'run', '--force')} redoes them)"
        )
    for day, failed in result.failed_checks.items():
        for check in failed:
            print(f"CHECK {day} {check}")
    warning = not_read_warning(home)
    if warning:
        print(f"WARNING: {warning}")
    return ExitCode.DONE


def cmd_worker(args: argparse.Namespace) -> int:
    """A Celery worker for day runs, until stopped."""
    from pipelines import workers
    from pipelines.lib.settings import BROKER, check_broker, shown

    try:
        broker = check_broker(args.broker or os.environ.get(BROKER.env, "").strip())
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    steps = args.steps or os.cpu_count() or 1
    what = f"{args.concurrency} day(s), {steps} step(s) at a time"
    print(f"fleet worker {args.name} on {shown(broker)}: {what}", flush=True)
    workers.serve(broker, args.concurrency, args.name, steps)
    return ExitCode.DONE


def cmd_ingest(args: argparse.Namespace) -> int:
    """Deliver (or adapt) files into landing, ingest their days, republish the catalog, print a summary."""
    from pipelines.lib.ingest import adapters
    from pipelines.lib.ingest.delivery import deliver_tree
    from pipelines.lib.storage.landing import landing_days

    home = DataHome.resolve(args.home)
    path = Path(args.path).resolve() if args.path else None
    if path is not None and not path.exists():
        raise UsageError(
            f"{path} does not exist; give a folder in the landing layout or a public trace folder"
        )
    if args.source == "prometheus":
        return _ingest_prometheus(args, home, path)
    if args.url or args.mapping:
        raise UsageError("--url and --mapping go with --source prometheus")
    if args.source in ("pai", "mlperf") and path is None:
        raise UsageError(
            f"--source {args.source} needs PATH, the folder of the downloaded public trace "
            "(docs/how-to/operators.md, 'Public traces')"
        )
    try:
        if args.source in ("pai", "mlperf"):
            adapted = (adapters.adapt_pai if args.source == "pai" else adapters.adapt_mlperf)(path)
            days = adapters.deliver(adapted, home)
            print(
                f"{args.source}: {adapted.n_runs:,} runs over {len(days)} days; "
                f"{len(adapted.platforms)} platforms registered in {home.user_catalog_dir / 'hardware.yaml'}"
            )
            for note in adapted.notes:
                print(f"  {note}")
        elif path is not None:
            days = deliver_tree(path, home)
        else:
            days = (
                _span(args.date_from, args.date_to or args.date_from)
                if args.date_from
                else landing_days(home)
            )
        if not days:
            raise UsageError(
                f"no landing days under {home.landing}; deliver files or run `fleet synth` first"
            )
    except OSError as exc:
        return _cannot_ingest(exc, home)
    return _ingest_and_summarise(args, home, days)


def _cannot_ingest(exc: OSError, home: DataHome) -> int:
    where = exc.filename or home.root
    why = disk_full(exc, home.root, STAGED_NOTHING_KEPT) or f"{exc.strerror or exc} ({where})"
    print(f"fleet: cannot do the ingest: {why}", file=sys.stderr)
    return ExitCode.FAILED


def _ingest_and_summarise(args: argparse.Namespace, home: DataHome, days: list[str]) -> int:
    """Ingest ``days``, printing progress, then the summary; a failure of the machine is one line, exit 1."""
    from pipelines.lib.ingest.delivery import ingest_days

    try:
        limits = Settings.resolve(home.root, home.lake_uri).ingest
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        s = ingest_days(home, days, progress=lambda m: print(m, flush=True), limits=limits)
    except OSError as exc:
        return _cannot_ingest(exc, home)
    return _print_summary(args, s, home)


def _print_summary(args: argparse.Namespace, s, home: DataHome) -> int:
    print(
        f"ingested {len(s.days)} day(s): {s.files} files, {s.rows_in:,} rows in, "
        f"{s.rows_accepted:,} accepted, {s.rows_quarantined:,} quarantined"
    )
    for status, n in s.files_by_status.items():
        print(f"  files {status}: {n}")
    for reason, n in s.entries_by_reason.items():
        print(f"  quarantine entries {reason}: {n:,}, e.g. {s.examples[reason]}")
    for line in s.fix_first:
        print(f"  FIX {line}")
    if s.blocked:
        print(f"  NOT promoted (a blocking check failed): {', '.join(s.blocked)}")
    for problem in s.volume_problems:
        print(f"  CHECK samples {problem}")
    if s.not_read:
        print(f"  WARNING: {s.not_read}")
    for note in s.notes:
        print(f"  NOTE (Prometheus) {note}")
    print(
        f"catalog: {home.catalog_path}  (tables quarantine and ingest_ledger; "
        f"{command(args, 'query', 'quarantine_by_reason')} sums them up)"
    )
    print(f"next: {command(args, 'run')} computes the analyses for these days")
    return ExitCode.DONE


def _install_mapping(home: DataHome, given: str) -> None:
    """Check a mapping file and keep it as the data home's."""
    from pipelines.lib import fileio, safe_yaml
    from pipelines.lib.ingest.prometheus.mapping import MappingError, build, user_file
    from workload_model.catalog import load_hardware

    path = Path(given)
    if not path.is_file():
        raise UsageError(f"--mapping {given}: no such file")
    hw = load_hardware(home.user_catalog_dir / "hardware.yaml")
    try:
        build(safe_yaml.load_file(path), str(path), frozenset(hw.platforms))
    except (MappingError, safe_yaml.YamlLimitError) as exc:
        raise UsageError(f"--mapping {' '.join(str(exc).split())}") from None
    fileio.write_bytes(user_file(home), path.read_bytes())


def _ingest_prometheus(args: argparse.Namespace, home: DataHome, path: Path | None) -> int:
    """fleet ingest --source prometheus: pull days from --url (or deliver exports at PATH), then ingest."""
    from pipelines.lib.ingest.delivery import deliver_tree

    if args.mapping:
        _install_mapping(home, args.mapping)
    if args.url and path is not None:
        raise UsageError(
            "give either --url (pull from a server) or PATH (exports in the landing layout), not both"
        )
    if args.url:
        if not args.date_from:
            raise UsageError("--url needs the days to pull: --from YYYY-MM-DD [--to YYYY-MM-DD]")
        days = _span(args.date_from, args.date_to or args.date_from)
        _pull(args.url, home, days, args.page_minutes)
    elif path is not None:
        days = deliver_tree(path, home)
    else:
        raise UsageError(
            "--source prometheus needs --url URL --from D [--to D] (pull from a server), or PATH (exports in "
            "the landing layout <source>/<YYYY-MM-DD>/<file>.om|.prom|.prom.json)"
        )
    return _ingest_and_summarise(args, home, days)


def _pull(url: str, home: DataHome, days: list[str], page_minutes: int) -> None:
    from pipelines.lib.ingest.prometheus.mapping import load_mapping
    from pipelines.lib.ingest.prometheus.pull import Client, PullError, pull_day
    from workload_model.catalog import load_hardware

    mapping = load_mapping(home, frozenset(load_hardware(home.user_catalog_dir / "hardware.yaml").platforms))
    client = Client(url)
    try:
        inclusive = client.major_version() < 3
        for day in days:
            start = time.perf_counter()
            got = pull_day(
                client, home, day, mapping, page=dt.timedelta(minutes=page_minutes), inclusive=inclusive
            )
            print(
                f"  pulled {day}: {got.jobs} job(s) started that day, {len(got.files)} files "
                f"({got.window[0]:%Y-%m-%d %H:%M} .. {got.window[1]:%Y-%m-%d %H:%M} UTC; "
                f"{time.perf_counter() - start:.1f} s)",
                flush=True,
            )
    except PullError as exc:
        raise Unavailable(f"{exc}; lower --page-minutes if the server refused a page as too large") from None


def cmd_demo(args: argparse.Namespace) -> int:
    if args.source == "prometheus":
        return _demo_prometheus(args)
    args.days = args.days or DEMO_DAYS
    args.runs_per_day = args.runs_per_day or DEMO_RUNS_PER_DAY
    start = time.perf_counter()
    home = DataHome.resolve(args.home)
    days = _days(None, args.days)
    print(
        f"synthesising {args.days} days x {args.runs_per_day} runs (seed {args.seed}) into {home.landing}",
        flush=True,
    )
    synthesize(home, home.landing, days, args.runs_per_day, args.seed, "jsonl", truth=True)
    code = cmd_run(args, days)
    print(
        f"demo finished in {time.perf_counter() - start:.1f} s; data home {home.root}\n"
        f"next: {command(args, 'ui')} (Dagster UI), {command(args, 'query')} (canned queries), "
        f"{command(args, 'sql')} (SQL over the catalog)"
    )
    return code


def _demo_prometheus(args: argparse.Namespace) -> int:
    """The synthetic fleet as exporters expose it, backfilled into a local Prometheus, pulled back over its
    HTTP API like any team's server, then materialised: what `fleet ingest --source prometheus` does."""
    from pipelines.lib.ingest.prometheus import server

    try:
        server.binaries()
    except server.PrometheusMissing as exc:
        raise UsageError(f"{exc}; then run `fleet demo --source prometheus` again") from None
    start = time.perf_counter()
    home = DataHome.resolve(args.home)
    days = _days(None, args.days or PROM_DEMO_DAYS)
    runs = args.runs_per_day or PROM_DEMO_RUNS
    exports = home.root / "prometheus" / "exports"
    shutil.rmtree(home.root / "prometheus", ignore_errors=True)
    print(f"synthesising {len(days)} days x {runs} runs (seed {args.seed}) as exporter scrapes in {exports}")
    synthesize(home, exports, days, runs, args.seed, "openmetrics", source="cluster")
    tsdb = home.root / "prometheus" / "tsdb"
    print(f"backfilling them into a Prometheus TSDB ({tsdb}) with promtool", flush=True)
    server.backfill(sorted(exports.rglob("*.om")), tsdb)
    with server.serving(tsdb, home.root / "prometheus") as url:
        pull = command(args, "ingest", "--source prometheus", f"--url {url} --from {days[0]} --to {days[-1]}")
        print(
            f"Prometheus serves them at {url}; pulling raw samples as {pull} would",
            flush=True,
        )
        _pull(url, home, days, 120)
    code = cmd_run(args, days)
    print(
        f"demo (Prometheus) finished in {time.perf_counter() - start:.1f} s; data home {home.root}\n"
        "the pulled scrapes are in landing/prometheus/<day>/ and the lake's metric_samples; runs and samples "
        "were derived from them with the mapping in catalog/prometheus.yaml\n"
        f"next: {command(args, 'query', 'quarantine_by_reason')}, {command(args, 'ui')}"
    )
    return code


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    add_home(p)
    p.add_argument(
        "--source",
        choices=("synthetic", "prometheus"),
        default="synthetic",
        help="where the demo's data comes from (default synthetic); prometheus: the fleet backfilled into a "
        "local Prometheus (needs prometheus and promtool) and pulled from it, "
        f"{PROM_DEMO_DAYS} days x {PROM_DEMO_RUNS} runs unless given",
    )
    p.add_argument("--days", type=at_least_one, help=f"days ending yesterday, UTC (default {DEMO_DAYS})")
    p.add_argument(
        "--runs-per-day", type=at_least_one, help=f"training runs per day (default {DEMO_RUNS_PER_DAY})"
    )
    p.add_argument("--seed", type=int, default=DEMO_SEED, help=f"random seed (default {DEMO_SEED})")
    add_workers(p)


def _synth_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--days", type=at_least_one, default=DEMO_DAYS, help=f"days to write (default {DEMO_DAYS})"
    )
    p.add_argument(
        "--start",
        type=iso_day,
        help="first day YYYY-MM-DD (default: the --days days that ended yesterday, UTC)",
    )
    p.add_argument(
        "--runs-per-day",
        type=at_least_one,
        default=DEMO_RUNS_PER_DAY,
        help=f"training runs per day (default {DEMO_RUNS_PER_DAY})",
    )
    p.add_argument("--seed", type=int, default=DEMO_SEED, help=f"random seed (default {DEMO_SEED})")
    p.add_argument("--out", help="landing root (default <data home>/landing)")
    p.add_argument("--source", default="synthetic", help="landing source folder name (default synthetic)")
    p.add_argument(
        "--format",
        choices=("jsonl", "csv", "parquet", "openmetrics"),
        default="jsonl",
        help="file format (default jsonl); openmetrics: the fleet as node_exporter, dcgm-exporter, "
        "kube-state-metrics and pcm-sensor-server would expose it, with timestamps",
    )
    p.add_argument("--gzip", action="store_true", help="gzip jsonl/csv files")
    p.add_argument(
        "--truth",
        action="store_true",
        help="also write the sampler's truth of the waste it made (stragglers, hot shards, servers each run "
        "needs) beside the landing root, in truth/; never ingested",
    )
    p.add_argument("--json", action="store_true", help="print counts and file paths as JSON")
    add_home(p, "; its catalog/ extends the built-in hardware and models")


def _run_arguments(p: argparse.ArgumentParser) -> None:
    add_home(p)
    p.add_argument(
        "--from", dest="date_from", type=iso_day, help="first day YYYY-MM-DD (default: every day in landing/)"
    )
    p.add_argument("--to", dest="date_to", type=iso_day, help="last day YYYY-MM-DD (default: --from)")
    add_workers(p)
    p.add_argument(
        "--executor",
        choices=("in_process", "celery"),
        help="where the days run: in processes here (in_process, the default) or on `fleet worker`s "
        "(celery; the merge still runs here); default $FLEET_EXECUTOR or in_process",
    )
    p.add_argument("--broker", help=BROKER_HELP)
    p.add_argument(
        "--force",
        action="store_true",
        help="redo every day, also those whose landing files, code and catalogs did not change since a "
        "successful run of theirs (skipped by default, each named)",
    )


def _worker_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--broker", help=BROKER_HELP)
    p.add_argument(
        "--concurrency", type=at_least_one, default=1, help="days at once (default 1: a day uses every core)"
    )
    p.add_argument(
        "--steps",
        type=at_least_one,
        help="steps of day runs at once, such as a split day's slices (default: one per core)",
    )
    p.add_argument("--name", default="fleet@%h", help="the worker's name (default fleet@%%h: this host)")


def _ingest_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "path",
        nargs="?",
        help="a folder in the landing layout <source>/<day>/<file> (Prometheus exports too), "
        "or a public trace folder",
    )
    p.add_argument(
        "--source",
        choices=("pai", "mlperf", "prometheus"),
        help="adapt that public trace found at PATH; prometheus: pull from --url "
        "(or deliver exports found at PATH)",
    )
    p.add_argument("--url", help="--source prometheus: the server, e.g. http://prometheus:9090")
    p.add_argument(
        "--mapping",
        help="--source prometheus: a mapping file (schemas/catalog/prometheus.yaml documents it); "
        "checked, then kept as <data home>/catalog/prometheus.yaml",
    )
    p.add_argument(
        "--page-minutes",
        type=at_least_one,
        default=120,
        help="--url: minutes of samples per request (default 120; lower it if the server refuses a page)",
    )
    add_home(p)
    p.add_argument(
        "--from", dest="date_from", type=iso_day, help="first landing day to (re)ingest YYYY-MM-DD"
    )
    p.add_argument("--to", dest="date_to", type=iso_day, help="last landing day YYYY-MM-DD")


WRITES_DAYS = Needs(user_catalog=True, lake=True, stages_days=True)
COMMANDS = (
    Command(
        "demo",
        "synthesise a fleet into the data home and materialise every asset",
        _demo_arguments,
        cmd_demo,
        WRITES_DAYS,
    ),
    Command(
        "synth",
        "write synthetic landing files (same seed and days, same bytes)",
        _synth_arguments,
        cmd_synth,
        Needs(user_catalog=True),
    ),
    Command(
        "run",
        "materialise every asset for landing days that changed; with --from/--to, a backfill of that range",
        _run_arguments,
        cmd_run,
        WRITES_DAYS,
    ),
    Command(
        "worker",
        "run day runs sent by `fleet run --executor celery` (or the Dagster UI on a Celery run launcher), "
        "until stopped",
        _worker_arguments,
        cmd_worker,
    ),
    Command(
        "ingest",
        "ingest landing files (or deliver a folder, or adapt a public trace) with a summary",
        _ingest_arguments,
        cmd_ingest,
        WRITES_DAYS,
    ),
)
