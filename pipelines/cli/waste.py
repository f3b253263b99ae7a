"""`fleet waste`: where the fleet wastes machines, in the terminal (servers and kW to win back, the runs that
hold the most, stragglers and hot shards)."""

from __future__ import annotations

import argparse
import json

import polars as pl

from pipelines.cli.args import Command, Needs, add_days_range, add_home, at_least_one, fraction
from pipelines.lib.errors import UsageError
from pipelines.lib.exit_codes import ExitCode
from pipelines.lib.paths import DataHome


def _text(view: dict) -> str:
    from pipelines.lib.query.render import plain_table

    t = view["totals"]
    share = t["servers_recoverable"] / t["servers_judged"] if t["servers_judged"] else 0.0
    targets = ", ".join(f"{x:g}" for x in t["target_p95_util"])
    basis = ", ".join(f"{k} {v:,}" for k, v in t["basis"].items())
    lines = [
        f"Where the fleet wastes machines: {t['first_day']} .. {t['last_day']} ({t['days']} days, "
        f"{t['runs']:,} runs; target p95 <= {targets})",
        f"  servers held {t['n_servers']:,}, of them {t['servers_judged']:,} in roles that could be judged; "
        f"these need {t['right_sized_servers']:,}: recoverable {t['servers_recoverable']:,} ({share:.0%})",
        f"  provisioned power of those servers {t['provisioned_kw_recoverable'] or 0:,.1f} kW, "
        "summed over runs (not drawn at one time)",
        f"  servers by sizing basis: {basis}",
        f"  stragglers: {t['stragglers']:,} servers in {t['runs_with_stragglers']:,} runs; "
        f"hot shards: {t['hot_shards']:,} servers in {t['runs_with_hot_shards']:,} runs",
        "",
        "By role",
        plain_table(view["by_role"]),
        "",
        "By model and platform",
        plain_table(view["by_model_platform"]),
        "",
        f"Top {view['top_runs'].height} runs by recoverable servers "
        "(role held -> right-sized, binding resource p95 now -> after)",
        plain_table(view["top_runs"]),
    ]
    return "\n".join(lines)


def _json(view: dict) -> str:
    from pipelines.lib.query.render import plain_value

    return json.dumps(
        {k: plain_value(v.to_dicts() if isinstance(v, pl.DataFrame) else v) for k, v in view.items()},
        indent=2,
    )


def cmd_waste(args: argparse.Namespace) -> int:
    """Totals, by role, by model and platform, and the top runs over a day range of the lake."""
    from pipelines.lib.analysis import waste

    if args.date_from and args.date_to and args.date_to < args.date_from:
        raise UsageError(
            f"--to {args.date_to} is before --from {args.date_from}; give the first day with --from"
        )
    home = DataHome.resolve(args.home)
    if not waste.lake_days(home, "run_efficiency"):
        raise UsageError(
            f"no right-sizing in {home.lake_uri}; run `fleet demo`, or `fleet run` after delivering data"
        )
    view = waste.answer(home, args.date_from, args.date_to, args.target, args.top)
    if view is None:
        raise UsageError(
            f"no right-sized runs between {args.date_from or 'the first day'} and "
            f"{args.date_to or 'the last day'}; `fleet query catalog_totals` shows what the lake holds"
        )
    print(_json(view) if args.json else _text(view))
    return ExitCode.DONE


def _waste_arguments(p: argparse.ArgumentParser) -> None:
    add_days_range(p)
    p.add_argument(
        "--target",
        type=fraction,
        help="p95 utilisation target to right-size against (default: what the nightly run used, 0.8); "
        "recomputed from the stored per-day aggregates",
    )
    p.add_argument("--top", type=at_least_one, default=10, help="runs to list (default 10)")
    add_home(p)
    p.add_argument("--json", action="store_true", help="totals, tables and runs as JSON")


COMMANDS = (
    Command(
        "waste",
        "where the fleet wastes machines: servers and kW to win back, top runs, outliers",
        _waste_arguments,
        cmd_waste,
        Needs(user_catalog=True, lake=True),
    ),
)
