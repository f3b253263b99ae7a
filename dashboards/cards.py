"""The report's recommendation cards: each model's recommended option with its band, bottleneck and why,
what it assumed of the software the workload did not state, and the paper's Table III comparison."""

from __future__ import annotations

import html

import polars as pl

from dashboards.fit_charts import best_per_platform
from workload_model import fields

TABLE_III = ("cpu", "big_basin")  # the paper's Table III compares these two


def _assumed(r: dict) -> str:
    """The software inputs the answer took from the platform's default stack, the range over their
    alternatives, and a warning where one of them would change the recommendation."""
    names = [n for n in (r.get("defaulted_inputs") or "").split(",") if n]
    if not names:
        return ""
    given = ", ".join(f"{n}={r[n]}" for n in names)
    text = f"Assumed, not stated: {given} (the platform's default stack)"
    if r.get("stack_alternatives"):
        low, high = r["throughput_low_eps"], r["throughput_high_eps"]
        text += f"; {low:,.0f}-{high:,.0f} examples/s under the alternatives ({r['stack_alternatives']})"
    out = f'<p class="note assumed">{html.escape(text)}.</p>'
    if r.get("stack_flips"):
        flip = f"Would change under {r['stack_flips']}."
        out += f'<p class="note flip"><b>{html.escape(flip)}</b></p>'
    return out


def _body(r: dict, note: str = "") -> str:
    """A card's text under its heading: the option, its band, bottleneck, why, what it assumed, its basis."""
    return (
        f'<p class="choice">{html.escape(r["platform"])} / {html.escape(r["placement"])}</p>'
        f"<p>{r['p50_throughput_eps']:,.0f} examples/s "
        f"(P10-P90 {r['p10_throughput_eps']:,.0f}-{r['p90_throughput_eps']:,.0f}), "
        f"{r['eps_per_w']:.1f} examples/s/W</p>"
        f"<p><b>Bottleneck:</b> {html.escape(r['bottleneck'] or '-')}</p>"
        f'<p class="why">{html.escape(r["explanation"])}</p>'
        + _assumed(r)
        + (f'<p class="note">{html.escape(note)}</p>' if note else "")
        + f'<p class="note">{html.escape(r["basis"])}'
        + (f"; held-out error {r['cv_mdape']:.1%}" if r["cv_mdape"] is not None else "")
        + "</p>"
    )


def _card(heading: str, body: str) -> str:
    return f'<div class="card"><h3>{html.escape(heading)}</h3>{body}</div>'


def why_no_recommendations(runs: pl.DataFrame) -> str:
    """Why the lake's runs give no recommendation: the night answers each model family that has runs
    which succeeded with a throughput and record their workload (pipelines.lib.analysis.recommend.Fleet)."""
    if runs.is_empty():
        return "No recommendations yet: they need runs in the lake (`fleet run`)."
    shape = list(fields.numeric_features())
    done = runs.filter((pl.col("status") == "succeeded") & (pl.col("throughput_eps") > 0))
    shaped = done.filter(pl.all_horizontal(pl.col(shape).is_not_null()) & pl.col("placement").is_not_null())
    return (
        f"No recommendations: of the {runs.height:,} runs in range, {done.height:,} succeeded with a "
        f"throughput and {shaped.height:,} of them record their workload (model shape, batch and placement: "
        "schemas/runs.yaml). Telemetry alone (Prometheus, or files without these columns) does not, so the "
        "hardware-fit answers have no model family to start from; `fleet recommend --config workload.yaml` "
        "answers for a workload you describe (examples/workload.yaml)."
    )


def cards(recs: pl.DataFrame, why_none: str = "No recommendations yet.") -> str:
    """One card per model and recommended option: objectives whose answer reads the same (both pick one
    option with the same figures and reasons) share a card, which names them, rather than show it twice."""
    if recs.is_empty():
        return f"<p>{html.escape(why_none)}</p>"
    best = recs.filter(pl.col("recommended")).sort("model_name", "objective")
    bodies = pl.Series("body", [_body(r) for r in best.iter_rows(named=True)], dtype=pl.String)
    shown = (
        best.select("model_name", "objective", bodies)
        .group_by("model_name", "body", maintain_order=True)
        .agg(pl.col("objective").unique(maintain_order=True).str.replace_all("_", " ").str.join(" and "))
    )
    every = [_card(f"{model} · {objectives}", body) for model, body, objectives in shown.iter_rows()]
    return '<div class="cards">' + "".join(every) + "</div>"


def table_iii_cards(recs: pl.DataFrame, paper: pl.DataFrame) -> str:
    """Per model, the better of its best CPU-cluster and best Big Basin options as the fleet runs them
    (throughput), beside the paper's own setting (the calibration's figures), saying what differs."""
    best = best_per_platform(recs, TABLE_III)
    rows = best.sort("p50_throughput_eps", descending=True).group_by("model_name", maintain_order=True)
    setting = {r["model_name"]: r for r in paper.iter_rows(named=True)}
    cards = []
    for (model,), options in sorted(rows, key=lambda g: g[0]):
        top = options.row(0, named=True)
        by = {r["platform"]: r for r in options.iter_rows(named=True)}
        heading = f"{model} · CPU cluster or Big Basin"
        note = ""
        if set(TABLE_III) <= set(by):
            bb, cpu = by["big_basin"], by["cpu"]
            heading += f" ({bb['p50_throughput_eps'] / cpu['p50_throughput_eps']:.2f}x Big Basin over CPU)"
            note = (
                f"As the fleet runs it: a CPU cluster of {cpu['n_trainers']} trainers, {cpu['n_sparse_ps']} "
                f"sparse PS and {cpu['n_dense_ps']} dense PS (sized by what binds) against Big Basin with "
                f"{bb['placement']}."
            )
        if model in setting:
            p = setting[model]
            note += (
                f" In the paper's Table III setting ({p['cpu_setup']} against one Big Basin with "
                f"{p['big_basin_placement']}, the calibration table's t1-t5) Big Basin is "
                f"{p['throughput_ratio']:.2f}x the throughput and {p['perf_per_watt_ratio']:.2f}x the "
                "perf/W: the setting differs, so the ratio does."
            )
        cards.append(_card(heading, _body(top, note)))
    return '<div class="cards">' + "".join(cards) + "</div>"
