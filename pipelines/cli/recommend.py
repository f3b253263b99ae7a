"""`fleet recommend`: every platform x placement for a workload (a model, a workload file or a run)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pipelines.lib.paths import DataHome


def _workload_from_config(path: Path) -> dict:
    """A workload from YAML or JSON: the runs contract's workload fields (+ batch_cpu / batch_gpu)."""
    import yaml

    from pipelines.lib.recommend import WORKLOAD_FIELDS
    from synthetic_fleet.whatif import WhatIfError, coerce

    if not path.exists():
        raise WhatIfError(f"{path} does not exist")
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise WhatIfError(f"{path}: expected a mapping of workload fields")
    allowed = set(WORKLOAD_FIELDS) | {"batch_cpu", "batch_gpu", "batch_size"}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise WhatIfError(f"{path}: unknown field(s) {unknown}; valid: {', '.join(sorted(allowed))}")
    required = [
        f
        for f in (
            "n_dense_features",
            "n_sparse_features",
            "embedding_dim",
            "embedding_gb",
            "mean_lookups_per_table",
            "bottom_mlp",
            "top_mlp",
            "interaction",
        )
        if f not in data
    ]
    if required:
        raise WhatIfError(f"{path}: missing field(s) {required}")
    out = {
        k: (
            coerce("batch_size", str(v))
            if k.startswith("batch")
            else v
            if k == "model_name"
            else coerce(k, str(v))
        )
        for k, v in data.items()
    }
    out.setdefault("n_tables", out["n_sparse_features"])
    out.setdefault("lookup_power_law_alpha", 1.1)
    out.setdefault("model_name", path.stem)
    b = out.pop("batch_size", None)
    out.setdefault("batch_cpu", b or 512)
    out.setdefault("batch_gpu", b or 4096)
    return out


def _workload_from_run(runs, run_id: str) -> dict:
    """The workload of an observed run (its batch on its own platform kind is kept for both kinds)."""
    import polars as pl

    from pipelines.lib.recommend import WORKLOAD_FIELDS
    from synthetic_fleet.whatif import WhatIfError

    hit = runs.filter(pl.col("run_id") == run_id)
    if hit.is_empty():
        raise WhatIfError(f"no run {run_id!r} in the lake")
    row = hit.row(0, named=True)
    missing = [k for k in WORKLOAD_FIELDS if k != "model_name" and row.get(k) is None]
    if missing:
        raise WhatIfError(
            f"run {run_id!r} does not record its workload ({', '.join(missing)} unknown); "
            "give it with --config or --set"
        )
    return {
        **{k: row[k] for k in WORKLOAD_FIELDS},
        "batch_cpu": row["batch_size"] if row["platform"] == "cpu" else 512,
        "batch_gpu": row["batch_size"] if row["platform"] != "cpu" else 4096,
    }


def cmd_recommend(args: argparse.Namespace) -> int:
    """Every platform x placement for a workload, ranked under an objective, with the fleet's correction."""
    from pipelines.lib import lake
    from pipelines.lib.recommend import Fleet, fit_correction, observed, recommend, workload_of_model
    from synthetic_fleet.catalog import load_hardware, load_models
    from synthetic_fleet.whatif import (
        WhatIfError,
        apply_settings,
        coerce,
        parse_setting,
        pick_model,
        pick_platforms,
    )

    home = DataHome.resolve(args.home)
    try:
        hw = load_hardware(home.user_catalog_dir / "hardware.yaml")
        if sum(bool(x) for x in (args.model, args.config, args.run)) != 1:
            raise WhatIfError("give exactly one of --model NAME, --config workload.yaml or --run RUN_ID")
        all_runs = lake.read_table(home, "runs")
        if args.model:
            workload = workload_of_model(
                pick_model(load_models(home.user_catalog_dir / "models.yaml"), args.model)
            )
        elif args.config:
            workload = _workload_from_config(Path(args.config))
        else:
            workload = _workload_from_run(all_runs, args.run)
        settings = {k: coerce(k, v) for k, v in (parse_setting(x) for x in args.set or [])}
        if "batch_size" in settings:
            workload["batch_cpu"] = workload["batch_gpu"] = settings.pop("batch_size")
        workload = apply_settings(workload, settings)
        platforms = pick_platforms(hw, args.platforms) if args.platforms else None
        fleet = Fleet.from_runs(all_runs, hw)
        correction = fit_correction(fleet, hw)
        res = observed(recommend(workload, hw, fleet, correction, args.objective, platforms), fleet)
    except (WhatIfError, ValueError) as exc:
        print(f"fleet recommend: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(
            json.dumps(
                {
                    "workload": workload,
                    "objective": args.objective,
                    "correction": correction.note,
                    "cv_mdape": correction.cv_mdape_corrected,
                    "options": res.to_dicts(),
                },
                indent=2,
                default=str,
            )
        )
        return 0
    best = res.filter(res["recommended"])
    name = workload.get("model_name")
    print(
        f"{name}: best {'throughput' if args.objective == 'throughput' else 'throughput per watt'}"
        + (f" among {', '.join(platforms)}" if platforms else " across the catalog")
    )
    if best.height:
        b = best.row(0, named=True)
        print(
            f"  -> {b['platform']} / {b['placement']}: {b['p50_throughput_eps']:,.0f} examples/s "
            f"(P10-P90 {b['p10_throughput_eps']:,.0f}-{b['p90_throughput_eps']:,.0f}), {b['eps_per_w']:.1f} examples/s/W"
        )
        print(f"     {b['explanation']}")
        if b["n_sparse_ps"] or b["n_dense_ps"]:
            print(
                f"     servers: {b['n_trainers']} trainers, {b['n_sparse_ps']} sparse PS, {b['n_dense_ps']} dense PS, "
                f"{b['n_readers']} readers" + (f" ({b['count_flags']})" if b["count_flags"] else "")
            )
        if b["observed_median_eps"] is not None:
            print(
                f"     the fleet ran this {b['n_observed_runs']} times: median {b['observed_median_eps']:,.0f} examples/s"
            )
    else:
        print("  -> nothing in the catalog fits these tables")
    print("  other options:")
    for r in res.filter(~res["recommended"]).iter_rows(named=True):  # a handful of options
        print(f"     {r['rank']}. {r['explanation']}")
    print(f"  basis: {correction.note}")
    return 0
