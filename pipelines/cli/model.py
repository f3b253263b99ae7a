"""`fleet calibrate` and `fleet whatif`: the workload model's calibration and its answers to one question."""

from __future__ import annotations

import argparse
import json
import sys

from pipelines.lib.paths import DataHome


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Every calibration target with the model's value and PASS/FAIL; non-zero if any fails."""
    from dataclasses import asdict

    from pipelines.lib import benchmarks
    from synthetic_fleet.calibration import evaluate, fit
    from synthetic_fleet.model import DEFAULT, coefficient_docs

    coef = fit(DEFAULT) if args.fit else DEFAULT
    results = evaluate(coef)
    public = benchmarks.evaluate(coef)
    failed = [r for r in results if not r.passed] + [c for c in public.checks if not c.passed]
    if args.json:
        print(
            json.dumps(
                {
                    "passed": not failed,
                    "targets": [r.as_dict() for r in results],
                    "public_benchmarks": {
                        "targets": [c.as_dict() for c in public.checks],
                        "systems": public.table.to_dicts(),
                        "scaling": public.scaling.to_dicts(),
                    },
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
        paper_ok = sum(r.passed for r in results)
        print(f"\n{paper_ok}/{len(results)} paper targets pass")
        print(f"* {', '.join(built)} hold by construction (an input is set to the target), not by prediction")
        _print_public(public)
    return 1 if failed else 0


def _print_public(public) -> None:
    """The public-benchmark section: every system predicted vs observed, scaling pairs, targets b1-b5."""
    print("\npublic benchmarks: MLPerf Training DLRM v0.7/v1.0 closed division (examples/mlperf/)")
    width = max(len(p) for p in public.table["platform"]) - len("mlperf_")
    print(
        f"  {'system':<{width}} {'nodes':>5} {'observed/s':>12} {'predicted/s':>12} {'ratio':>6} {'LOSO':>6}"
    )
    for r in public.table.iter_rows(named=True):
        print(
            f"  {r['platform'][len('mlperf_') :]:<{width}} {r['nodes']:>5} {r['observed_eps']:>12,.0f} "
            f"{r['predicted_eps']:>12,.0f} {r['ratio']:>6.2f} {r['loso_ratio']:>6.2f}"
        )
    print("  scaling (many nodes over one): observed, predicted")
    for r in public.scaling.iter_rows(named=True):
        print(
            f"    {r['many'][len('mlperf_') :]} / {r['one'][len('mlperf_') :]}: "
            f"{r['observed']:.2f}, {r['predicted']:.2f}"
        )
    for c in public.checks:
        print(
            f"{'PASS' if c.passed else 'FAIL'}  {c.id:<4} {c.description:<70}  "
            f"want {c.expected}; model: {c.value}"
        )
    print(f"{sum(c.passed for c in public.checks)}/{len(public.checks)} public-benchmark targets pass")


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
