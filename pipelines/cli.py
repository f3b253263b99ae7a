"""The `fleet` command: demo, synth, run, ui."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pipelines.lib.paths import PROJECT_ROOT, DataHome

DEMO_DAYS = 5
DEMO_RUNS_PER_DAY = 110
DEMO_SEED = 2021


def _days(start: str | None, n: int) -> list[str]:
    """``n`` consecutive UTC days from ``start``; by default the ``n`` days that ended yesterday."""
    if n < 1:
        raise SystemExit("fleet: --days must be at least 1")
    if start:
        try:
            first = dt.date.fromisoformat(start)
        except ValueError:
            raise SystemExit(f"fleet: --start {start!r} is not a date YYYY-MM-DD") from None
    else:
        first = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=n)
    return [(first + dt.timedelta(days=i)).isoformat() for i in range(n)]


def _span(first: str, last: str) -> list[str]:
    """Every day from ``first`` to ``last`` inclusive."""
    try:
        a, b = dt.date.fromisoformat(first), dt.date.fromisoformat(last)
    except ValueError as exc:
        raise SystemExit(f"fleet: {exc}; dates are YYYY-MM-DD") from None
    if b < a:
        raise SystemExit(f"fleet: --to {last} is before --from {first}")
    return [(a + dt.timedelta(days=i)).isoformat() for i in range((b - a).days + 1)]


def synthesize(
    out: Path,
    days: list[str],
    runs_per_day: int,
    seed: int,
    fmt: str,
    source: str = "synthetic",
    gzip_level: int | None = None,
    quiet: bool = False,
) -> dict:
    """Write a synthetic fleet into landing folder ``out``; returns counts."""
    from synthetic_fleet.catalog import load_hardware, load_models
    from synthetic_fleet.writers import write_fleet

    home_catalog = DataHome.resolve().user_catalog_dir
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
                f"  [{i}/{len(days)}] {fleet.day}: {fleet.runs.height} runs, {fleet.samples.height:,} samples "
                f"({time.perf_counter() - clock[0]:.1f} s)",
                flush=True,
            )
        clock[0] = time.perf_counter()

    write_fleet(
        days, runs_per_day, seed, hw, models, out, source=source, fmt=fmt, gzip_level=gzip_level, on_day=done
    )
    return totals


def cmd_synth(args: argparse.Namespace) -> int:
    days = _days(args.start, args.days)
    out = Path(args.out).resolve() if args.out else DataHome.resolve().landing
    totals = synthesize(
        out,
        days,
        args.runs_per_day,
        args.seed,
        args.format,
        args.source,
        gzip_level=6 if args.gzip else None,
        quiet=args.json,
    )
    if args.json:
        print(json.dumps(totals, indent=2))
    else:
        print(f"wrote {totals['runs']} runs and {totals['samples']:,} samples over {len(days)} days to {out}")
    return 0


def _summary(home: DataHome) -> dict:
    import duckdb

    con = duckdb.connect(str(home.catalog_path), read_only=True)
    try:
        one = lambda q: con.execute(q).fetchone()[0]  # noqa: E731
        return {
            "runs": one("SELECT count(*) FROM runs"),
            "samples": one("SELECT count(*) FROM utilisation_samples"),
            "rows_quarantined": one("SELECT coalesce(sum(rows_quarantined), 0) FROM ingest_ledger"),
            "landing_files": one("SELECT count(*) FROM ingest_ledger"),
        }
    finally:
        con.close()


def cmd_run(args: argparse.Namespace, days: list[str] | None = None) -> int:
    from pipelines.lib.ingest import landing_days
    from pipelines.orchestrate import run_pipeline

    home = DataHome.resolve(args.home)
    if days is None:
        days = landing_days(home)
        if args.date_from:
            days = _span(args.date_from, args.date_to or args.date_from)
    if not days:
        print(
            f"fleet: no landing days under {home.landing}; run `fleet synth` or deliver files first",
            file=sys.stderr,
        )
        return 2
    print(f"materialising {len(days)} day(s) into {home.root}", flush=True)
    result = run_pipeline(home, days, progress=lambda m: print(m, flush=True))
    summary = _summary(home)
    print(f"\nreport:  {home.report_path}\ncatalog: {home.catalog_path}")
    print(
        f"runs {summary['runs']:,} · samples {summary['samples']:,} · quarantined rows {summary['rows_quarantined']:,}"
        f" · landing files {summary['landing_files']} · wall time {result.seconds:.1f} s"
    )
    return 0


def _deliver_tree(src: Path, home: DataHome) -> list[str]:
    """Copy a folder in the landing layout (<source>/<YYYY-MM-DD>/<file>) into the data home's landing."""
    from pipelines.lib.ingest import landing_days
    from synthetic_fleet.writers import write_bytes_atomic

    probe = DataHome(src.parent) if src.name == "landing" else None
    days = landing_days(probe) if probe else []
    files = [p for p in sorted(src.glob("*/*/*")) if p.is_file() and not p.name.startswith(".")]
    if not files:
        raise SystemExit(f"fleet: {src} holds no files in the landing layout <source>/<YYYY-MM-DD>/<file>")
    for f in files:
        write_bytes_atomic(home.landing / f.relative_to(src), f.read_bytes())
    return days or sorted({f.parent.name for f in files})


def cmd_ingest(args: argparse.Namespace) -> int:
    """Deliver (or adapt) files into landing, ingest their days, republish the catalog, print a summary."""
    import polars as pl

    from pipelines.lib import adapters
    from pipelines.lib.ingest import ingest_partition, landing_days
    from pipelines.lib.warehouse import publish_catalog
    from synthetic_fleet.catalog import load_hardware

    home = DataHome.resolve(args.home)
    path = Path(args.path).resolve() if args.path else None
    if path is not None and not path.exists():
        print(f"fleet: {path} does not exist", file=sys.stderr)
        return 2
    try:
        if args.source in ("pai", "mlperf"):
            if path is None:
                print(
                    f"fleet: --source {args.source} needs the folder of the public data (e.g. ../shared/realdata/...)",
                    file=sys.stderr,
                )
                return 2
            adapted = (adapters.adapt_pai if args.source == "pai" else adapters.adapt_mlperf)(path)
            days = adapters.deliver(adapted, home)
            print(
                f"{args.source}: {adapted.n_runs:,} runs over {len(days)} days; {len(adapted.platforms)} platforms "
                f"registered in {home.user_catalog_dir / 'hardware.yaml'}"
            )
            for note in adapted.notes:
                print(f"  {note}")
        elif path is not None:
            days = _deliver_tree(path, home)
        else:
            days = (
                _span(args.date_from, args.date_to or args.date_from)
                if args.date_from
                else landing_days(home)
            )
        if not days:
            print(f"fleet: no landing days under {home.landing}", file=sys.stderr)
            return 2
        platforms = load_hardware(home.user_catalog_dir / "hardware.yaml").platforms.keys()
        ledgers, quarantines, blocked = [], [], []
        for day in days:
            outcome = ingest_partition(home, day, platforms)
            ledgers.append(outcome.result.ingest_ledger)
            quarantines.append(outcome.result.quarantine)
            if not outcome.promoted:
                blocked.append(day)
        publish_catalog(home)
    except OSError as exc:
        print(
            f"fleet: cannot do the ingest: {exc.strerror or exc} ({exc.filename or home.root})",
            file=sys.stderr,
        )
        return 1
    ledger, quarantine = pl.concat(ledgers), pl.concat(quarantines)
    by_reason = (
        quarantine.group_by("reason_code").agg(pl.len().alias("entries")).sort("entries", descending=True)
    )
    print(
        f"ingested {len(days)} day(s): {ledger.height} files, {int(ledger['rows_in'].sum()):,} rows in, "
        f"{int(ledger['rows_accepted'].sum()):,} accepted, {int(ledger['rows_quarantined'].sum()):,} quarantined"
    )
    for status, n in ledger.group_by("file_status").len().sort("file_status").iter_rows():
        print(f"  files {status}: {n}")
    for reason, n in by_reason.iter_rows():
        print(f"  quarantine entries {reason}: {n}")
    if blocked:
        print(f"  NOT promoted (a blocking check failed): {', '.join(blocked)}")
    print(
        f"catalog: {home.catalog_path}  (quarantine: SELECT * FROM quarantine; files: SELECT * FROM ingest_ledger)"
    )
    print("next: `fleet run` computes the analyses for these days")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Every calibration target with the model's value and PASS/FAIL; non-zero if any fails."""
    from dataclasses import asdict

    from synthetic_fleet.calibration import evaluate, fit
    from synthetic_fleet.model import DEFAULT, coefficient_docs

    coef = fit(DEFAULT) if args.fit else DEFAULT
    results = evaluate(coef)
    failed = [r for r in results if not r.passed]
    if args.json:
        print(
            json.dumps(
                {
                    "passed": not failed,
                    "targets": [r.as_dict() for r in results],
                    "coefficients": asdict(coef),
                    "coefficient_targets": coefficient_docs(),
                },
                indent=2,
            )
        )
    else:
        for r in results:
            verdict = ("PASS" if r.passed else "FAIL") + ("*" if r.by_construction else " ")
            print(f"{verdict} {r.id:<4} {r.kind:<8} {r.description[:70]:<70}  want {r.expected}")
            print(f"{'':16}model: {r.value}")
            if r.by_construction:
                print(f"{'':16}by construction: {r.by_construction}")
        if args.fit:
            print("\nfitted coefficients (copy into synthetic_fleet/model.py to adopt):")
            for k, v in asdict(coef).items():
                if getattr(DEFAULT, k) != v:
                    print(f"  {k} = {v:.4g}   (was {getattr(DEFAULT, k):.4g})")
        built = [r.id for r in results if r.by_construction]
        print(f"\n{len(results) - len(failed)}/{len(results)} targets pass")
        print(f"* {', '.join(built)} hold by construction (an input is set to the target), not by prediction")
    return 1 if failed else 0


def _fmt_num(v, unit: str = "") -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}{unit}" if abs(v) >= 100 else f"{v:.3g}{unit}"


def cmd_whatif(args: argparse.Namespace) -> int:
    """The workload model's answer for one configuration, or a sweep of one field over platforms."""
    from pipelines.lib.workload import INPUT_ERRORS
    from synthetic_fleet.catalog import load_hardware, load_models
    from synthetic_fleet.whatif import (
        ask,
        coerce,
        parse_setting,
        pick_model,
        pick_platforms,
        utilisation_table,
    )

    home = DataHome.resolve(args.home)
    try:
        hw = load_hardware(home.user_catalog_dir / "hardware.yaml")
        model = pick_model(load_models(home.user_catalog_dir / "models.yaml"), args.model)
        platforms = pick_platforms(hw, args.platform)
        settings = dict(parse_setting(s) for s in args.set or [])
        settings = {k: coerce(k, v) for k, v in settings.items()}
        sweep = None
        if args.sweep:
            key, values = parse_setting(args.sweep)
            sweep = (key, [coerce(key, v) for v in values.split(",") if v])
        answer = ask(model, platforms, args.placement, hw, settings, sweep)
    except INPUT_ERRORS as exc:
        print(f"fleet whatif: {exc}", file=sys.stderr)
        return 2
    rows = answer.records()
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    if sweep or len(rows) > 1:
        head = (
            f"{sweep[0] if sweep else '':>18} " if sweep else ""
        ) + f"{'platform':<10} {'placement':<14} {'fits':<22} {'examples/s':>11} {'ex/s/W':>7}  bottleneck"
        print(
            f"{model.name}: "
            + (f"sweep of {sweep[0]}" if sweep else "every placement")
            + (f" with {settings}" if settings else "")
        )
        print(head)
        for r in rows:
            fit = "yes" if r["fits"] else f"no, {r['tier']} short {r['shortfall_gb']:,.0f} GB"
            mark = " *" if r["default_placement"] else ""
            print(
                (f"{r['sweep_value']:>18} " if sweep else "")
                + f"{r['platform']:<10} {r['placement']:<14} {fit:<22} "
                f"{_fmt_num(r['throughput_eps']):>11} {_fmt_num(r['eps_per_w']):>7}  "
                f"{r['bottleneck'] or '-'}{mark}"
            )
        print("* best placement on that platform")
        return 0
    r = rows[0]
    print(
        f"{model.name} on {r['platform']} with {r['placement']} (batch {r['batch_size']}, "
        f"trainers {r['n_trainers']}, sparse PS {r['n_sparse_ps']}, dense PS {r['n_dense_ps']}, "
        f"readers {r['n_readers']})"
    )
    print(
        f"  tables + optimizer state: {r['required_gb']:,.1f} GB in {r['tier']} "
        f"of {r['capacity_gb']:,.1f} GB usable -> "
        + (
            f"fits, headroom {r['headroom']:.0%}"
            if r["fits"]
            else f"DOES NOT FIT: short by {r['shortfall_gb']:,.1f} GB"
        )
    )
    if not r["fits"]:
        return 0
    print(f"  throughput: {_fmt_num(r['throughput_eps'])} examples/s; bottleneck: {r['bottleneck']}")
    print(
        f"  power: {_fmt_num(r['power_w'], ' W')} drawn, {_fmt_num(r['provisioned_w'], ' W')} provisioned; "
        f"{_fmt_num(r['eps_per_w'])} examples/s per provisioned W"
        + (" (readers draw power but are not provisioned)" if r["power_w"] > r["provisioned_w"] else "")
    )
    print(
        "  per-iteration terms: "
        + ", ".join(
            f"{k[2:-2]} {r[k] * 1e3:.2f} ms"
            for k in ("t_mlp_s", "t_embedding_s", "t_network_s", "t_overhead_s", "t_iteration_s")
            if r.get(k) is not None
        )
    )
    print("  mean utilisation:")
    for role, res in utilisation_table(r).items():
        print(f"    {role:<10} " + "  ".join(f"{k} {v:.0%}" for k, v in res.items()))
    return 0


def cmd_recommend(args: argparse.Namespace) -> int:
    """Every platform x placement for a workload, ranked under an objective, with the fleet's correction."""
    from pipelines.lib import lake
    from pipelines.lib.recommend import Fleet, fit_correction, observed, recommend
    from pipelines.lib.workload import INPUT_ERRORS, build
    from synthetic_fleet.catalog import load_hardware
    from synthetic_fleet.whatif import pick_platforms

    home = DataHome.resolve(args.home)
    try:
        hw = load_hardware(home.user_catalog_dir / "hardware.yaml")
        all_runs = lake.read_table(home, "runs")
        kw = {"model": args.model, "config": args.config, "run": args.run, "settings": args.set}
        workload = build(home.user_catalog_dir, all_runs, **kw)
        platforms = pick_platforms(hw, args.platforms) if args.platforms else None
        fleet = Fleet.from_runs(all_runs, hw)
        correction = fit_correction(fleet, hw)
        res = observed(recommend(workload, hw, fleet, correction, args.objective, platforms), fleet)
    except (*INPUT_ERRORS, ValueError) as exc:
        print(f"fleet recommend: {exc}", file=sys.stderr)
        return 2
    if args.json:
        out = {"workload": workload, "objective": args.objective, "correction": correction.note}
        out |= {"cv_mdape": correction.cv_mdape_used, "band_coverage": correction.cv_band_coverage}
        print(json.dumps(out | {"options": res.to_dicts()}, indent=2, default=str))
        return 0
    best = res.filter(res["recommended"])
    goal = "throughput" if args.objective == "throughput" else "throughput per watt"
    where = f" among {', '.join(platforms)}" if platforms else " across the catalog"
    print(f"{workload.get('model_name')}: best {goal}{where}")
    if best.height:
        b = best.row(0, named=True)
        print(f"  -> {b['platform']} / {b['placement']}")
        print(f"     {b['explanation']}")
        if b["count_flags"]:
            print(f"     ({b['count_flags']})")
        if b["observed_median_eps"] is not None:
            print(
                f"     the fleet ran this {b['n_observed_runs']} times: "
                f"median {b['observed_median_eps']:,.0f} examples/s"
            )
    else:
        print("  -> nothing in the catalog fits these tables")
    print("  other options:")
    for r in res.filter(~res["recommended"]).iter_rows(named=True):  # a handful of options
        print(f"     {r['rank']}. {r['explanation']}")
    print(f"  basis: {correction.note}")
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    """List the canned analyst queries, or run one read-only against the catalog."""
    from pipelines.lib import queries

    if not args.name:
        for q in queries.canned().values():
            params = ", ".join(f"{k}={v}" for k, v in q.defaults.items())
            print(f"{q.name:<34} {q.description}" + (f"  [{params}]" if params else ""))
        return 0
    home = DataHome.resolve(args.home)
    try:
        params = dict(p.split("=", 1) for p in args.param or [])
        frame = queries.run(home.catalog_path, args.name, params)
    except (KeyError, ValueError) as exc:
        print(f"fleet query: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    if args.json:
        print(frame.write_json())
    else:
        import polars as pl

        with pl.Config(tbl_rows=50, tbl_cols=-1, tbl_width_chars=200, fmt_str_lengths=80):
            print(frame)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Write the HTML report and every chart as PNG and SVG from the lake's aggregated tables."""
    from dashboards.report import write_report

    home = DataHome.resolve(args.home)
    out = Path(args.out).resolve() if args.out else home.reports
    start = time.perf_counter()
    try:
        art = write_report(home, out, args.date_from, args.date_to)
    except OSError as exc:
        print(f"fleet report: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(
        f"report: {art.html}\ncharts: {len(art.pngs)} PNG and {len(art.svgs)} SVG in {art.html.parent / 'charts'} "
        f"({time.perf_counter() - start:.1f} s)"
    )
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    home = DataHome.resolve(args.home)
    os.environ["FLEET_HOME"] = str(home.root)
    days = _days(None, args.days)
    print(
        f"synthesising {args.days} days x {args.runs_per_day} runs (seed {args.seed}) into {home.landing}",
        flush=True,
    )
    synthesize(home.landing, days, args.runs_per_day, args.seed, "jsonl")
    code = cmd_run(args, days)
    print(
        f"demo finished in {time.perf_counter() - start:.1f} s. Open the UI with `make ui` (or `fleet ui`); "
        f"query with `duckdb -readonly {home.catalog_path}`."
    )
    return code


def cmd_ui(args: argparse.Namespace) -> int:
    """`dagster dev` on the demo's instance, stoppable with Ctrl-C or SIGTERM."""
    from pipelines.orchestrate import ensure_instance

    home = DataHome.resolve(args.home)
    os.environ["FLEET_HOME"] = str(home.root)
    ensure_instance(home)
    cmd = [str(Path(sys.executable).with_name("dagster")), "dev", "-h", args.host, "-p", str(args.port)]
    print(
        f"Dagster UI on http://{args.host}:{args.port} (DAGSTER_HOME={os.environ['DAGSTER_HOME']})",
        flush=True,
    )
    # A shell without job control starts us with SIGINT ignored; dagster dev would then ignore SIGTERM too.
    proc = subprocess.Popen(
        cmd,
        cwd=PROJECT_ROOT,
        preexec_fn=lambda: (
            signal.signal(signal.SIGINT, signal.SIG_DFL),
            signal.signal(signal.SIGTERM, signal.SIG_DFL),
        ),
    )
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        return proc.wait()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fleet", description="Fleet telemetry analytics for recommendation-model training."
    )
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="synthesise a fleet into the data home and materialise every asset")
    d.add_argument("--home", help="data home (default $FLEET_HOME or ./data)")
    d.add_argument("--days", type=int, default=DEMO_DAYS)
    d.add_argument("--runs-per-day", type=int, default=DEMO_RUNS_PER_DAY)
    d.add_argument("--seed", type=int, default=DEMO_SEED)
    d.set_defaults(func=cmd_demo)

    s = sub.add_parser("synth", help="write synthetic landing files (same seed and days, same bytes)")
    s.add_argument("--days", type=int, default=DEMO_DAYS)
    s.add_argument(
        "--start", help="first day YYYY-MM-DD (default: the --days days that ended yesterday, UTC)"
    )
    s.add_argument("--runs-per-day", type=int, default=DEMO_RUNS_PER_DAY)
    s.add_argument("--seed", type=int, default=DEMO_SEED)
    s.add_argument("--out", help="landing root (default <data home>/landing)")
    s.add_argument("--source", default="synthetic", help="landing source folder name")
    s.add_argument("--format", choices=("jsonl", "csv", "parquet"), default="jsonl")
    s.add_argument("--gzip", action="store_true", help="gzip jsonl/csv files")
    s.add_argument("--json", action="store_true", help="print counts and file paths as JSON")
    s.set_defaults(func=cmd_synth)

    r = sub.add_parser(
        "run", help="materialise every asset for landing days; with --from/--to, a backfill of that range"
    )
    r.add_argument("--home")
    r.add_argument(
        "--from", dest="date_from", help="first day YYYY-MM-DD (default: every day found in landing/)"
    )
    r.add_argument("--to", dest="date_to", help="last day YYYY-MM-DD (default: --from)")
    r.set_defaults(func=cmd_run)

    i = sub.add_parser(
        "ingest", help="ingest landing files (or deliver a folder, or adapt a public trace) with a summary"
    )
    i.add_argument(
        "path",
        nargs="?",
        help="a folder in the landing layout <source>/<day>/<file>, or a public trace folder",
    )
    i.add_argument("--source", help="pai | mlperf: adapt that public trace found at PATH")
    i.add_argument("--home")
    i.add_argument("--from", dest="date_from", help="first landing day to (re)ingest YYYY-MM-DD")
    i.add_argument("--to", dest="date_to", help="last landing day YYYY-MM-DD")
    i.set_defaults(func=cmd_ingest)

    c = sub.add_parser(
        "calibrate", help="print every calibration target with the model's value and PASS/FAIL"
    )
    c.add_argument("--json", action="store_true")
    c.add_argument(
        "--fit", action="store_true", help="re-fit the coefficients of the exact targets first and show them"
    )
    c.set_defaults(func=cmd_calibrate)

    w = sub.add_parser("whatif", help="ask the workload model about a configuration or a sweep")
    w.add_argument("--model", required=True, help="a model of the catalog, e.g. M1prod")
    w.add_argument("--platform", required=True, help="platform key(s), comma-separated: cpu,big_basin,zion")
    w.add_argument(
        "--placement", help="gpu_hbm | system_memory | remote_ps | hybrid (default: every placement)"
    )
    w.add_argument(
        "--set", action="append", metavar="FIELD=VALUE", help="override a workload or system field"
    )
    w.add_argument("--sweep", metavar="FIELD=V1,V2,...", help="sweep one field")
    w.add_argument("--home")
    w.add_argument("--json", action="store_true")
    w.set_defaults(func=cmd_whatif)

    rc = sub.add_parser("recommend", help="rank every platform x placement for a workload")
    rc.add_argument("--model", help="a model of the catalog, e.g. M3prod")
    rc.add_argument("--config", help="a workload as YAML or JSON (runs contract workload fields)")
    rc.add_argument("--run", help="the workload of an observed run (run_id in the lake)")
    rc.add_argument("--set", action="append", metavar="FIELD=VALUE", help="override a workload field")
    rc.add_argument("--objective", choices=("throughput", "perf_per_watt"), default="throughput")
    rc.add_argument("--platforms", help="restrict to these platforms, comma-separated (e.g. cpu,big_basin)")
    rc.add_argument("--home")
    rc.add_argument("--json", action="store_true")
    rc.set_defaults(func=cmd_recommend)

    q = sub.add_parser("query", help="list the canned analyst queries, or run one")
    q.add_argument("name", nargs="?")
    q.add_argument("--param", action="append", metavar="NAME=VALUE")
    q.add_argument("--home")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_query)

    rp = sub.add_parser("report", help="write the HTML report and every chart as PNG and SVG")
    rp.add_argument("--out", help="folder (default <data home>/reports)")
    rp.add_argument("--from", dest="date_from", help="first day YYYY-MM-DD")
    rp.add_argument("--to", dest="date_to", help="last day YYYY-MM-DD")
    rp.add_argument("--home")
    rp.set_defaults(func=cmd_report)

    u = sub.add_parser("ui", help="start the Dagster UI on the data home's instance")
    u.add_argument("--home")
    u.add_argument("--host", default="127.0.0.1")
    u.add_argument("--port", type=int, default=3000)
    u.set_defaults(func=cmd_ui)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
