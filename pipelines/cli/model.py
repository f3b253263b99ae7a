"""`fleet calibrate` and `fleet whatif`: the workload model's calibration and its answers to one question."""

from __future__ import annotations

import argparse
import json
import sys

from pipelines.cli.args import Command, Needs, add_home, at_least_one, names, setting, sweep
from pipelines.cli.hints import runnable
from pipelines.lib.exit_codes import ExitCode
from pipelines.lib.paths import DataHome


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Every calibration target with the model's value and PASS/FAIL, then the public benchmarks; non-zero
    if any fails. With --fit: the shared coefficients fitted to the data home's observed runs instead."""
    from dataclasses import asdict

    from pipelines.lib.analysis import benchmarks
    from synthetic_fleet.sampler import default_fleet
    from workload_model import components
    from workload_model.calibration import evaluate
    from workload_model.coefficients import DEFAULT, coefficient_docs

    if args.fit:
        return _fit_to_lake(args)
    results = evaluate(DEFAULT, fleet=default_fleet())
    public = benchmarks.evaluate(DEFAULT)
    parts = components.evaluate(DEFAULT)
    failed = [r for r in (*results, *public.checks, *parts) if not r.passed]
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
                    "component_measurements": [c.as_dict() for c in parts],
                    "coefficients": asdict(DEFAULT),
                    "coefficient_targets": coefficient_docs(),
                },
                indent=2,
            )
        )
        return ExitCode.FAILED if failed else ExitCode.DONE
    for r in results:
        verdict = ("PASS" if r.passed else "FAIL") + ("*" if r.by_construction else " ")
        print(f"{verdict} {r.id:<4} {r.kind:<8} {r.description[:70]:<70}  want {r.expected}")
        print(f"{'':16}model: {r.value}")
        if r.by_construction:
            print(f"{'':16}by construction: {r.by_construction}")
    built = [r.id for r in results if r.by_construction]
    print(f"\n{sum(r.passed for r in results)}/{len(results)} targets pass (the paper's)")
    print(f"* {', '.join(built)} hold by construction (an input is set to the target), not by prediction")
    _print_public(public)
    print("\ncomponent measurements: each hardware term within what public micro-benchmarks show")
    for c in parts:
        print(
            f"{'PASS' if c.passed else 'FAIL'}  {c.id:<4} {c.term[:64]:<64}  "
            f"want {c.low:g}-{c.high:g}; model: {c.coefficient} = {c.value:g}"
        )
    print(f"{sum(c.passed for c in parts)}/{len(parts)} component targets pass (docs/model-terms.md)")
    return ExitCode.FAILED if failed else ExitCode.DONE


def _fit_to_lake(args: argparse.Namespace) -> int:
    """`fleet calibrate --fit`: fit, leave-one-platform-out error, stored in the data home."""
    from pipelines.lib.analysis.fit import fit_path, run_fit
    from workload_model.catalog import load_hardware, load_models

    home = DataHome.resolve(args.home)
    hw = load_hardware(home.user_catalog_dir / "hardware.yaml", lenient=True)
    models = load_models(home.user_catalog_dir / "models.yaml", lenient=True)
    warn_invalid("calibrate", hw, models, set())
    try:
        record = run_fit(home, hw, models)
    except ValueError as exc:
        print(f"fleet calibrate: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    if args.json:
        print(json.dumps(record, indent=2))
        return ExitCode.DONE
    platforms = len(record["platforms"])
    print(f"fitted to {record['runs']} observed runs on {platforms} platforms of {home.lake_uri}")
    for k, v in record["fitted"].items():
        print(f"  {k} = {v:.4g}   (default {record['defaults'][k]:.4g})")
    print(f"in-sample median error {record['in_sample_median_error']:.2f}x")
    if record["held_out_median_error"] is not None:
        print(
            f"leave-one-platform-out error (fitted without the platform's runs, then predicted): median "
            f"{record['held_out_median_error']:.2f}x, worst {record['held_out_worst_error']:.2f}x"
        )
        for p, e in record["held_out_by_platform"].items():
            print(f"  {p:<{max(map(len, record['held_out_by_platform']))}}  {e:.2f}x")
    print(runnable(f"stored in {fit_path(home)}: `fleet whatif` and `fleet recommend` answer with it", args))
    return ExitCode.DONE


def _print_public(public) -> None:
    """The public-benchmark section: every system predicted vs observed, scaling pairs, targets b1-b5."""
    print("\npublic benchmarks: MLPerf Training DLRM v0.7/v1.0 closed division (examples/mlperf/)")
    width = max(len(p) for p in public.table["platform"]) - len("mlperf_")
    print(
        f"  {'system':<{width}} {'nodes':>5} {'observed/s':>12} {'predicted/s':>12} {'ratio':>6} {'LOSO':>6} "
        f"{'no stack':>8}"
    )
    for r in public.table.iter_rows(named=True):
        print(
            f"  {r['platform'][len('mlperf_') :]:<{width}} {r['nodes']:>5} {r['observed_eps']:>12,.0f} "
            f"{r['predicted_eps']:>12,.0f} {r['ratio']:>6.2f} {r['loso_ratio']:>6.2f} "
            f"{r['unstated_ratio']:>8.2f}"
        )
    print("  (no stack: the ratio when the software is not stated and each platform's default applies)")
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


def _range(r: dict) -> str:
    """An answer's throughput range over the alternatives to its defaulted software, "-" if none."""
    lo, hi = r.get("throughput_low_eps"), r.get("throughput_high_eps")
    if not r.get("stack_alternatives") or lo is None:
        return "-"
    return f"{_fmt_num(lo)}-{_fmt_num(hi)}"


def _assumed_notes(rows: list[dict]) -> list[str]:
    """What an answer assumed of the software, per platform: the inputs that came from the platform's
    default stack, the range over their alternatives, and where another option would win under one."""
    out, seen = [], set()
    for r in rows:
        names = [n for n in (r.get("defaulted_inputs") or "").split(",") if n]
        if not names or r["platform"] in seen or not r["fits"]:
            continue
        seen.add(r["platform"])
        given = ", ".join(f"{n}={r[n]}" for n in names)
        why = "not stated: its default stack, docs/model-terms.md"
        out.append(f"assumed on {r['platform']} ({why}): {given}")
        if r.get("stack_alternatives"):
            out.append(f"  under the alternatives: {_range(r)} examples/s ({r['stack_alternatives']})")
    for r in rows:
        if r.get("stack_flips"):
            out.append(f"  the best placement on {r['platform']} would change under {r['stack_flips']}")
    return out


# How the server counts of an answer were chosen (the same in whatif and recommend).
SIZED = "counts as given, else default trainers and every other tier sized by what binds it"


def _fmt_num(v, unit: str = "") -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}{unit}" if abs(v) >= 100 else f"{v:.3g}{unit}"


def warn_invalid(command: str, hw, models, asked: set[str]) -> None:
    """One stderr line per invalid user catalog entry the command left out (not those asked for: the
    command's error names them)."""
    for name, why in {**hw.invalid, **models.invalid}.items():
        if name not in asked:
            print(
                f"fleet {command}: warning: {why}; that entry is left out, the others are used",
                file=sys.stderr,
            )


def _counts(r: dict) -> str:
    return f"{r['n_trainers']}/{r['n_sparse_ps']}/{r['n_dense_ps']}/{r['n_readers']}"


def cmd_whatif(args: argparse.Namespace) -> int:
    """The workload model's answer for one configuration, or a sweep of one field over platforms."""
    from pipelines.lib.analysis.fit import load_fit
    from pipelines.lib.analysis.workload import INPUT_ERRORS, assumed_line, build
    from pipelines.lib.storage import lake
    from workload_model.catalog import load_hardware, load_models
    from workload_model.whatif import ask, coerce, parse_setting, pick_platforms, utilisation_table

    home = DataHome.resolve(args.home)
    settings = list(args.set or []) + ([f"n_trainers={args.servers}"] if args.servers else [])
    try:
        hw = load_hardware(home.user_catalog_dir / "hardware.yaml", lenient=True)
        models = load_models(home.user_catalog_dir / "models.yaml", lenient=True)
        runs = lake.read_table(home, "runs") if args.run else None
        kw = {"model": args.model, "config": args.config, "run": args.run, "settings": settings}
        workload = build(home.user_catalog_dir, runs, **kw)
        platforms = pick_platforms(hw, args.platform)
        sweep = None
        if args.sweep:
            key, values = parse_setting(args.sweep)
            sweep = (key, [coerce(key, v) for v in values.split(",") if v])
        fit = load_fit(home)
        answer = ask(workload, platforms, args.placement, hw, {}, sweep, fit.coef)
    except INPUT_ERRORS as exc:
        print(f"fleet whatif: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    warn_invalid("whatif", hw, models, {*platforms, args.model or ""})
    rows = answer.records()
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return ExitCode.DONE
    name = workload.get("model_name") or "(custom)"
    if line := assumed_line(workload):
        print(line)
    if sweep or len(rows) > 1:
        title = f"{name}: " + (f"sweep of {sweep[0]}, " if sweep else "")
        where = f"placement {args.placement}" if args.placement else "every placement"
        title += f"{where} on {', '.join(platforms)}" + (f" with {', '.join(settings)}" if settings else "")
        _print_table(title, rows, sweep[0] if sweep else None)
        print(f"model: {fit.note}")
        return ExitCode.DONE
    r = rows[0]
    print(
        f"{name} on {r['platform']} with {r['placement']} (batch {r['batch_size']}, "
        f"trainers {r['n_trainers']}, sparse PS {r['n_sparse_ps']}, dense PS {r['n_dense_ps']}, "
        f"readers {r['n_readers']}; {SIZED})"
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
        return ExitCode.DONE
    print(f"  throughput: {_fmt_num(r['throughput_eps'])} examples/s; bottleneck: {r['bottleneck']}")
    for line in _assumed_notes(rows):
        print("  " + line)
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
    print(f"  model: {fit.note}")
    return ExitCode.DONE


def _print_table(title: str, rows: list[dict], swept: str | None) -> None:
    """A whatif answer of several rows (placements, a sweep) as an aligned table, then what it assumed."""
    print(title)
    table = [
        {
            "value": r["sweep_value"] or "",
            "platform": r["platform"],
            "placement": r["placement"],
            "fits": "yes" if r["fits"] else f"no, {r['tier']} short {r['shortfall_gb']:,.0f} GB",
            "examples/s": _fmt_num(r["throughput_eps"]),
            "ex/s/W": _fmt_num(r["eps_per_w"]),
            "servers": _counts(r),
            "range": _range(r),
            "bottleneck": (r["bottleneck"] or "-") + (" *" if r["default_placement"] else ""),
        }
        for r in rows
    ]
    heads = {"value": swept or ""} | {k: k for k in table[0] if k != "value"}
    if not swept:
        heads.pop("value")
    width = {k: max(len(h), *(len(t[k]) for t in table)) for k, h in heads.items()}
    right = {"value", "examples/s", "ex/s/W", "servers", "range"}
    cell = lambda k, v: f"{v:>{width[k]}}" if k in right else f"{v:<{width[k]}}"  # noqa: E731
    print("  ".join(cell(k, h) for k, h in heads.items()).rstrip())
    for t in table:
        print("  ".join(cell(k, t[k]) for k in heads).rstrip())
    print("* best placement on that platform; servers: trainers/sparse PS/dense PS/readers (" + SIZED + ")")
    print("range: examples/s over the alternatives to the software it assumed (see below)")
    for line in _assumed_notes(rows):
        print(line)


def _calibrate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="every target and coefficient as JSON")
    p.add_argument(
        "--fit",
        action="store_true",
        help="fit the shared coefficients to the data home's observed runs, with their "
        "leave-one-platform-out error, and store the fit there (whatif and recommend then use it)",
    )
    add_home(p)


def _whatif_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="a model of the catalog, e.g. M1prod")
    p.add_argument("--config", help="a workload as YAML or JSON (runs contract workload fields)")
    p.add_argument("--run", help="the workload of an observed run (run_id in the lake)")
    p.add_argument(
        "--platform", required=True, type=names, help="platform key(s), comma-separated: cpu,big_basin,zion"
    )
    p.add_argument(
        "--placement", help="gpu_hbm | system_memory | remote_ps | hybrid (default: every placement)"
    )
    p.add_argument(
        "--set",
        action="append",
        type=setting,
        metavar="FIELD=VALUE",
        help="override a workload or system field",
    )
    p.add_argument("--servers", type=at_least_one, metavar="N", help="trainer servers (= --set n_trainers=N)")
    p.add_argument(
        "--sweep",
        type=sweep,
        metavar="FIELD=V1,V2,...",
        help="sweep one field (also n_trainers, the server count, and gpus, GPUs per server)",
    )
    add_home(p)
    p.add_argument("--json", action="store_true", help="the answer as JSON records")


COMMANDS = (
    Command(
        "calibrate",
        "print every calibration target with the model's value and PASS/FAIL",
        _calibrate_arguments,
        cmd_calibrate,
    ),
    Command(
        "whatif",
        "ask the workload model about a configuration or a sweep",
        _whatif_arguments,
        cmd_whatif,
        Needs(user_catalog=True, lenient_catalog=True),
    ),
)
