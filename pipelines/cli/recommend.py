"""`fleet recommend`: every platform x placement for a workload (a model, a workload file or a run)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import textwrap

import polars as pl

from pipelines.cli.args import Command, Needs, add_home, at_least_one, names, setting
from pipelines.cli.hints import runnable
from pipelines.lib.exit_codes import ExitCode
from pipelines.lib.paths import DataHome
from pipelines.lib.query.render import plain_table

WIDTH = 110  # characters per printed line
NUMBER_AND_WORD = re.compile(r"(\d[\d,.]*x?) (?=\S)")


def cmd_recommend(args: argparse.Namespace) -> int:
    """Every platform x placement for a workload, ranked under an objective, with the fleet's correction."""
    from threadpoolctl import threadpool_limits

    from pipelines.cli.model import warn_invalid
    from pipelines.lib.analysis.fit import load_fit
    from pipelines.lib.analysis.recommend import recommend
    from pipelines.lib.analysis.recommend_fleet import cached_correction, observed
    from pipelines.lib.analysis.workload import INPUT_ERRORS, assumed_line, build
    from pipelines.lib.storage import lake
    from workload_model.catalog import load_hardware, load_models
    from workload_model.whatif import pick_platforms

    home = DataHome.resolve(args.home)
    settings = list(args.set or []) + ([f"n_trainers={args.servers}"] if args.servers else [])
    try:
        hw = load_hardware(home.user_catalog_dir / "hardware.yaml", lenient=True)
        models = load_models(home.user_catalog_dir / "models.yaml", lenient=True)
        kw = {"model": args.model, "config": args.config, "run": args.run, "settings": settings}
        workload = build(home.user_catalog_dir, lake.read_table(home, "runs"), **kw)
        platforms = pick_platforms(hw, args.platforms) if args.platforms else None
        fit = load_fit(home)
        warn_invalid("recommend", hw, models, {*(platforms or []), args.model or ""})
        print("the fleet correction ...", file=sys.stderr, flush=True)
        fleet, correction, coef, reused = cached_correction(home, hw)
        print(
            f"  {'read back (cached' if reused else 'fitted (now cached'} until the runs, the hardware "
            f"catalog or the model fit change): {fleet.runs.height:,} runs",
            file=sys.stderr,
            flush=True,
        )
        print("ranking every platform x placement ...", file=sys.stderr, flush=True)
        with threadpool_limits(limits=len(os.sched_getaffinity(0))):  # sklearn's threads: one per core
            ranked = recommend(workload, hw, fleet, correction, args.objective, platforms, coef)
            res = observed(ranked, fleet, workload)
    except (*INPUT_ERRORS, ValueError) as exc:
        print(f"fleet recommend: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    if args.json:
        out = {"workload": workload, "objective": args.objective, "correction": correction.note}
        out |= {"cv_mdape": correction.cv_mdape_used, "band_coverage": correction.cv_band_coverage}
        out |= {"model_fit": fit.note}
        print(json.dumps(out | {"options": res.to_dicts()}, indent=2, default=str))
        return ExitCode.DONE
    best = res.filter(res["recommended"])
    goal = "throughput" if args.objective == "throughput" else "throughput per watt"
    where = f" among {', '.join(platforms)}" if platforms else " across the catalog"
    print(f"{workload.get('model_name')}: best {goal}{where}")
    if line := assumed_line(workload):
        _say(line, indent=2)
    if best.height:
        _print_best(best.row(0, named=True))
    else:
        print("  -> nothing in the catalog fits these tables")
    _print_others(_others(res, args.objective))
    _say(f"basis: {correction.note}", indent=2)
    outside = res["observed_note"].drop_nulls()
    if correction.cv_band_coverage is not None and outside.len():
        _say(
            "the band's coverage was measured on the workloads the fleet ran; this one lies outside them "
            f"({outside[0]}), so the band is a model estimate here, not a measured one",
            indent=2,
        )
    _say(runnable(f"model: {fit.note}", args), indent=2)
    return ExitCode.DONE


def _print_best(b: dict) -> None:
    """The recommended option: its explanation, flags, what the fleet observed, and what it assumed."""
    _say(b["explanation"], first="  -> ")
    if b["count_flags"]:
        _say(f"({b['count_flags']})")
    if b["observed_median_eps"] is not None:
        ran, median = b["n_observed_runs"], b["observed_median_eps"]
        _say(f"the fleet ran this {ran} times: median {median:,.0f} examples/s")
    elif b["observed_note"]:
        _say(f"no observed median: {b['observed_note']}")
    for line in assumed_lines(b):
        _say(line)


def _print_others(others: pl.DataFrame) -> None:
    if others.height:
        print("  other options (servers: trainers/sparse PS/dense PS/readers; --json explains each):")
        header, _, *rows, _ = plain_table(others).splitlines()  # without the rule and the row count
        for line in (header, *rows):
            print(f"     {line}")


def _others(res: pl.DataFrame, objective: str) -> pl.DataFrame:
    """The options not recommended, one line each: the figures of their explanation, and what limits them
    (a bottleneck, docs: "Hardware-fit recommendations") or why they do not fit."""
    from workload_model.alternatives import thousands

    score = pl.col("p50_throughput_eps" if objective == "throughput" else "eps_per_w")
    best = score.filter(pl.col("recommended")).first()
    servers = pl.concat_str(
        [pl.col(c).cast(pl.String) for c in ("n_trainers", "n_sparse_ps", "n_dense_ps", "n_readers")],
        separator="/",
    )
    return (
        res.with_columns(_best=best)
        .filter(~pl.col("recommended"))
        .select(
            pl.col("rank").alias("#"),
            (pl.col("platform") + "/" + pl.col("placement")).alias("option"),
            pl.col("p50_throughput_eps").round(0).cast(pl.Int64).alias("ex/s"),
            pl.format(
                "{}-{}", thousands(pl.col("p10_throughput_eps")), thousands(pl.col("p90_throughput_eps"))
            )
            .fill_null("-")
            .alias("P10-P90"),
            pl.col("eps_per_w").round(1).alias("ex/s/W"),
            pl.format("{}%", (score / pl.col("_best") * 100).round(0).cast(pl.Int64))
            .fill_null("-")
            .alias("of best"),
            pl.when(pl.col("fits")).then(servers).otherwise(pl.lit("-")).alias("servers"),
            pl.when(pl.col("fits"))
            .then(pl.col("bottleneck"))
            .otherwise(pl.format("does not fit: {} GB short", pl.col("shortfall_gb").round(1)))
            .alias("limited by"),
        )
    )


def _say(text: str, indent: int = 5, first: str | None = None) -> None:
    """``text`` wrapped to the terminal's usual width, continued lines indented under it; a number stays
    on the line of the word after it ("8 trainers", "72,803 ex/s")."""
    kept = NUMBER_AND_WORD.sub("\\1\xa0", text)
    lead = " " * indent if first is None else first
    wrapped = textwrap.fill(kept, WIDTH, initial_indent=lead, subsequent_indent=" " * (indent + 2))
    print(wrapped.replace("\xa0", " "))


def assumed_lines(option: dict) -> list[str]:
    """What a recommended option assumed of the software the workload did not state, the range over the
    alternatives, and the alternatives under which another option would be recommended."""
    names = [n for n in (option.get("defaulted_inputs") or "").split(",") if n]
    if not names:
        return []
    given = ", ".join(f"{n}={option[n]}" for n in names)
    out = [f"assumed (not stated: {option['platform']}'s default stack, docs/model-terms.md): {given}"]
    if option.get("stack_alternatives"):
        low, high = option["throughput_low_eps"], option["throughput_high_eps"]
        out.append(f"under the alternatives {low:,.0f}-{high:,.0f} ex/s ({option['stack_alternatives']})")
    if option.get("stack_flips"):
        out.append(f"WARNING: the recommendation would change under {option['stack_flips']}")
    return out


def _recommend_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="a model of the catalog, e.g. M3prod")
    p.add_argument("--config", help="a workload as YAML or JSON (runs contract workload fields)")
    p.add_argument("--run", help="the workload of an observed run (run_id in the lake)")
    p.add_argument(
        "--set",
        action="append",
        type=setting,
        metavar="FIELD=VALUE",
        help="override a workload field, a server count or gpus (GPUs per server)",
    )
    p.add_argument(
        "--servers",
        type=at_least_one,
        metavar="N",
        help="trainer servers of every option (= --set n_trainers=N)",
    )
    p.add_argument(
        "--objective",
        choices=("throughput", "perf_per_watt"),
        default="throughput",
        help="what 'best' means (default throughput)",
    )
    p.add_argument(
        "--platforms", type=names, help="restrict to these platforms, comma-separated (e.g. cpu,big_basin)"
    )
    add_home(p)
    p.add_argument("--json", action="store_true", help="the workload and every option as JSON")


COMMANDS = (
    Command(
        "recommend",
        "rank every platform x placement for a workload",
        _recommend_arguments,
        cmd_recommend,
        Needs(user_catalog=True, lenient_catalog=True, lake=True),
    ),
)
