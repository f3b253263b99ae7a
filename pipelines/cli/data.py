"""`fleet synth`, `fleet ingest`, `fleet run`, `fleet demo`: data into the lake, analyses out."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path

from pipelines.lib.paths import DataHome
from pipelines.lib.preflight import UsageError

DEMO_DAYS = 5
DEMO_RUNS_PER_DAY = 110
DEMO_SEED = 2021


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
    from synthetic_fleet.catalog import load_hardware, load_models
    from synthetic_fleet.writers import truth_root, write_fleet

    home_catalog = home.user_catalog_dir
    hw, models = load_hardware(home_catalog / "hardware.yaml"), load_models(home_catalog / "models.yaml")
    totals = {"days": len(days), "runs": 0, "samples": 0, "files": []}
    clock = [time.perf_counter()]

    def done(fleet, paths) -> None:
        totals["runs"] += fleet.runs.height
        totals["samples"] += fleet.samples.height
        totals["files"] += [str(p) for p in paths]
        if not quiet:
            i = len(totals["files"]) // 2
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
    return totals


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
        if args.truth:
            print(f"the sampler's truth (stragglers, hot shards, servers needed) is in {totals['truth']}")
    return 0


def cmd_run(args: argparse.Namespace, days: list[str] | None = None) -> int:
    from pipelines.lib import lake, queries
    from pipelines.lib.delivery import not_read_warning
    from pipelines.lib.landing import landing_days
    from pipelines.orchestrate import run_pipeline

    home = DataHome.resolve(args.home)
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
                return 2
            if empty:
                print(f"note: no landing files for {len(empty)} day(s) ({', '.join(empty)}); they stay empty")
    if not days:
        print(
            f"fleet: no landing days under {home.landing}; run `fleet synth` or deliver files first",
            file=sys.stderr,
        )
        return 2
    print(f"materialising {len(days)} day(s) into {home.root}", flush=True)
    result = run_pipeline(
        home,
        days,
        progress=lambda m: print(m, flush=True),
        workers=args.workers,
        force=getattr(args, "force", False),
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
            "(`fleet run --force` redoes them)"
        )
    for day, failed in result.failed_checks.items():
        for check in failed:
            print(f"CHECK {day} {check}")
    warning = not_read_warning(home)
    if warning:
        print(f"WARNING: {warning}")
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    """Deliver (or adapt) files into landing, ingest their days, republish the catalog, print a summary."""
    from pipelines.lib import adapters
    from pipelines.lib.delivery import deliver_tree, ingest_days
    from pipelines.lib.landing import landing_days

    home = DataHome.resolve(args.home)
    path = Path(args.path).resolve() if args.path else None
    if path is not None and not path.exists():
        raise UsageError(
            f"{path} does not exist; give a folder in the landing layout or a public trace folder"
        )
    if args.source in ("pai", "mlperf") and path is None:
        raise UsageError(
            f"--source {args.source} needs PATH, the folder of the downloaded public trace "
            "(README.md, 'Public traces')"
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
        s = ingest_days(home, days, progress=lambda m: print(m, flush=True))
    except OSError as exc:
        print(
            f"fleet: cannot do the ingest: {exc.strerror or exc} ({exc.filename or home.root})",
            file=sys.stderr,
        )
        return 1
    print(
        f"ingested {len(days)} day(s): {s.files} files, {s.rows_in:,} rows in, "
        f"{s.rows_accepted:,} accepted, {s.rows_quarantined:,} quarantined"
    )
    for status, n in s.files_by_status.items():
        print(f"  files {status}: {n}")
    for reason, n in s.entries_by_reason.items():
        print(f"  quarantine entries {reason}: {n}")
    if s.blocked:
        print(f"  NOT promoted (a blocking check failed): {', '.join(s.blocked)}")
    for problem in s.volume_problems:
        print(f"  CHECK samples {problem}")
    if s.not_read:
        print(f"  WARNING: {s.not_read}")
    print(
        f"catalog: {home.catalog_path}  "
        "(tables quarantine and ingest_ledger; `fleet query quarantine_by_reason` sums them up)"
    )
    print("next: `fleet run` computes the analyses for these days")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
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
        f"next: `fleet ui --home {home.root}` (Dagster UI), "
        f"`fleet query --home {home.root}` (canned queries), "
        f"`fleet sql --home {home.root}` (SQL over the catalog)"
    )
    return code
