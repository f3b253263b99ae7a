"""The fleet report: Altair charts of every analysis in one self-contained HTML file (works offline)."""

from __future__ import annotations

import html
import os
from dataclasses import dataclass
from pathlib import Path

import altair as alt
import polars as pl

from pipelines.lib.contracts import contract

TEMPLATE = Path(__file__).resolve().parent / "report_template.html"
COARSE_BINS = 50  # report resolution; the lake keeps 1000 bins
ROLE_COLORS = alt.Scale(domain=["trainer", "sparse_ps", "dense_ps", "reader"], range=["#1f77b4", "#d62728", "#ff7f0e", "#7f7f7f"])


@dataclass(frozen=True)
class ReportInputs:
    """Everything the report shows, already aggregated (small frames)."""

    util_distribution: pl.DataFrame
    server_count_hist: pl.DataFrame
    hardware_fit: pl.DataFrame
    trainer_vs_ps: pl.DataFrame
    recommendations: pl.DataFrame
    summary: dict[str, str]


def utilisation_chart(dist: pl.DataFrame) -> alt.Chart:
    """Per-sample utilisation density by role, one panel per resource (all days, all models)."""
    n_bins = int(contract("util_distribution").parameters["n_bins"])
    coarse = (dist.filter(pl.col("statistic") == "sample")
              .with_columns((pl.col("bin").cast(pl.Int32) * COARSE_BINS // n_bins).alias("cbin"))
              .group_by("role", "resource", "cbin").agg(pl.col("n").sum())
              .with_columns(((pl.col("cbin") + 0.5) / COARSE_BINS).alias("utilisation"),
                            (pl.col("n") / pl.col("n").sum().over("role", "resource") * COARSE_BINS).alias("density"))
              .sort("role", "resource", "cbin"))
    return (alt.Chart(coarse, title="Utilisation by role (per sample, all runs)")
            .mark_line(interpolate="step-after")
            .encode(x=alt.X("utilisation:Q", scale=alt.Scale(domain=[0, 1]), title="utilisation"),
                    y=alt.Y("density:Q", title="density"),
                    color=alt.Color("role:N", scale=ROLE_COLORS),
                    tooltip=["role:N", "resource:N", alt.Tooltip("utilisation:Q", format=".2f"), alt.Tooltip("density:Q", format=".2f")])
            .properties(width=220, height=140)
            .facet(facet=alt.Facet("resource:N", title=None), columns=3))


def server_count_chart(hist: pl.DataFrame) -> alt.Chart:
    """Runs per server count, per role, coloured by platform."""
    merged = hist.group_by("platform", "role", "n_servers").agg(pl.col("n_runs").sum()).sort("role", "n_servers")
    return (alt.Chart(merged, title="Servers per run (Figs. 8-9 of the paper)")
            .mark_bar()
            .encode(x=alt.X("n_servers:O", title="servers in the run"), y=alt.Y("n_runs:Q", title="runs"),
                    color="platform:N", tooltip=["role:N", "platform:N", "n_servers:O", "n_runs:Q"])
            .properties(width=260, height=150)
            .facet(facet=alt.Facet("role:N", title=None), columns=2)
            .resolve_scale(x="independent"))


def fit_chart(fit: pl.DataFrame) -> alt.Chart:
    """Median memory headroom per model and platform x placement; red where the tables do not fit."""
    agg = (fit.group_by("model_name", "platform", "placement")
           .agg(pl.col("headroom").median(), pl.col("fits").all(), pl.col("required_gb").median())
           .with_columns(pl.format("{}/{}", "platform", "placement").alias("option")))
    base = alt.Chart(agg, title="Do the embedding tables fit? (median headroom of the tier)").encode(
        x=alt.X("option:N", title=None), y=alt.Y("model_name:N", title=None))
    cells = base.mark_rect().encode(
        color=alt.Color("headroom:Q", scale=alt.Scale(domain=[-1, 0, 1], range=["#b2182b", "#f7f7f7", "#2166ac"]), title="headroom"),
        tooltip=["model_name:N", "option:N", alt.Tooltip("headroom:Q", format=".0%"), "fits:N", alt.Tooltip("required_gb:Q", format=".0f")])
    text = base.mark_text(fontSize=11).encode(text=alt.Text("headroom:Q", format=".0%"))
    return (cells + text).properties(width=520, height=120)


def _table(frame: pl.DataFrame, columns: list[str], floats: str = "{:,.3g}") -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    rows = []
    for rec in frame.select(columns).iter_rows():  # a small, already-aggregated table
        cells = "".join(f"<td>{html.escape(floats.format(v) if isinstance(v, float) else str(v))}</td>" for v in rec)
        rows.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def render(inputs: ReportInputs) -> str:
    """The report as one HTML document with Vega, Vega-Lite and vega-embed inlined (no external URL)."""
    charts = alt.vconcat(utilisation_chart(inputs.util_distribution), server_count_chart(inputs.server_count_hist),
                         fit_chart(inputs.hardware_fit)).configure_view(stroke=None)
    page = charts.to_html(inline=True)
    recs = inputs.recommendations.filter(pl.col("rank") == 1).sort("model_name", "objective")
    # The paper's Fig. 5 setting: one model on one system configuration (CPU trainers + remote PS).
    tvp = inputs.trainer_vs_ps.filter((pl.col("platform") == "cpu") & (pl.col("ps_role") == "sparse_ps")).sort("model_name", "resource")
    body = TEMPLATE.read_text(encoding="utf-8").format(
        summary="".join(f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in inputs.summary.items()),
        recommendations=_table(recs, ["model_name", "objective", "platform", "placement", "p50_throughput_eps",
                                      "eps_per_w", "observed_median_eps", "explanation"]),
        trainer_vs_ps=_table(tvp, ["model_name", "resource", "trainer_mean_util", "ps_mean_util", "trainer_iqr_util", "ps_iqr_util",
                                   "trainer_upper_tail_util", "ps_upper_tail_util", "ks_statistic", "paper_pattern"]),
    )
    # Insert before the chart container: "<body>" also occurs inside the inlined vega-embed source.
    marker = '<div class="vega-visualization" id="vis"></div>'
    if page.count(marker) != 1:
        raise RuntimeError("unexpected Altair HTML layout: chart container not found exactly once")
    return page.replace(marker, body + "\n" + marker)


def write_report(inputs: ReportInputs, target: Path) -> Path:
    """Render and write atomically; returns the path."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(render(inputs), encoding="utf-8")
    os.replace(tmp, target)
    return target
