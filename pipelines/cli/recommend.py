"""`fleet recommend`: every platform x placement for a workload (a model, a workload file or a run)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from pipelines.lib.paths import DataHome


def cmd_recommend(args: argparse.Namespace) -> int:
    """Every platform x placement for a workload, ranked under an objective, with the fleet's correction."""
    from threadpoolctl import threadpool_limits

    from pipelines.cli.model import warn_invalid
    from pipelines.lib import lake
    from pipelines.lib.fit import load_fit
    from pipelines.lib.recommend import Fleet, fit_correction, recommend
    from pipelines.lib.recommend_fleet import observed
    from pipelines.lib.workload import INPUT_ERRORS, build
    from synthetic_fleet.catalog import load_hardware, load_models
    from synthetic_fleet.whatif import pick_platforms

    home = DataHome.resolve(args.home)
    settings = list(args.set or []) + ([f"n_trainers={args.servers}"] if args.servers else [])
    try:
        hw = load_hardware(home.user_catalog_dir / "hardware.yaml", lenient=True)
        models = load_models(home.user_catalog_dir / "models.yaml", lenient=True)
        all_runs = lake.read_table(home, "runs")
        kw = {"model": args.model, "config": args.config, "run": args.run, "settings": settings}
        workload = build(home.user_catalog_dir, all_runs, **kw)
        platforms = pick_platforms(hw, args.platforms) if args.platforms else None
        fit = load_fit(home)
        fleet = Fleet.from_runs(all_runs, hw)
        warn_invalid("recommend", hw, models, {*(platforms or []), args.model or ""})
        print(f"fitting the fleet correction on {fleet.runs.height:,} runs ...", file=sys.stderr, flush=True)
        with threadpool_limits(limits=len(os.sched_getaffinity(0))):  # sklearn's threads: one per core
            correction = fit_correction(fleet, hw, fit.coef)
            print("ranking every platform x placement ...", file=sys.stderr, flush=True)
            ranked = recommend(workload, hw, fleet, correction, args.objective, platforms, fit.coef)
            res = observed(ranked, fleet, workload)
    except (*INPUT_ERRORS, ValueError) as exc:
        print(f"fleet recommend: {exc}", file=sys.stderr)
        return 2
    if args.json:
        out = {"workload": workload, "objective": args.objective, "correction": correction.note}
        out |= {"cv_mdape": correction.cv_mdape_used, "band_coverage": correction.cv_band_coverage}
        out |= {"model_fit": fit.note}
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
        elif b["observed_note"]:
            print(f"     no observed median: {b['observed_note']}")
        for line in assumed_lines(b):
            print(f"     {line}")
    else:
        print("  -> nothing in the catalog fits these tables")
    print("  other options:")
    for r in res.filter(~res["recommended"]).iter_rows(named=True):  # a handful of options
        print(f"     {r['rank']}. {r['explanation']}")
    print(f"  basis: {correction.note}")
    print(f"  model: {fit.note}")
    return 0


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
