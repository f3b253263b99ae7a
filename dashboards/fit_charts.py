"""The hardware-fit charts: the workload x platform/placement heatmaps of the recommendations (every cell
with a value or why it has none) and the paper's Table III setting, CPU clusters vs Big Basin."""

from __future__ import annotations

import altair as alt
import polars as pl

from dashboards.charts import PLATFORM_COLORS, color_scale

FIT_NOTE = (  # shown under the heatmaps
    "Every cell has a value or says why it has none. ✕ no fit: the model's embedding tables exceed that "
    "placement's memory tier. = gpu_hbm: the tables fit in the GPUs' memory, so hybrid (tables split between "
    "GPU and host memory) is the same system as gpu_hbm and is not ranked apart; the fleet's hybrid runs of "
    "that model run as gpu_hbm does. – not ranked: the recommender has no answer for that model and option. "
    "A placement a platform does not offer has no column (CPU clusters keep tables on remote PS only)."
)
CELL_TEXT = {"no_fit": "✕ no fit", "same_as_gpu_hbm": "= gpu_hbm", "not_ranked": "– not ranked"}


def fit_cells(recs: pl.DataFrame) -> pl.DataFrame:
    """Every model x platform/placement of the throughput ranking, each with ``cell``: ``value`` (it fits),
    ``no_fit``, ``same_as_gpu_hbm`` (hybrid where the tables fit HBM: gpu_hbm under another name, which the
    recommender answers with the gpu_hbm option's figures) or ``not_ranked``."""
    d = recs.filter(pl.col("objective") == "throughput").with_columns(
        pl.format("{}/{}", "platform", "placement").alias("option")
    )
    options = d.select("option", "platform", "placement").unique()
    grid = d.select("model_name").unique().join(options, how="cross")
    hbm_fits = d.filter((pl.col("placement") == "gpu_hbm") & pl.col("fits")).select(
        "model_name", "platform", pl.lit(True).alias("hbm_fits")
    )
    return (
        grid.join(d.drop("platform", "placement"), on=["model_name", "option"], how="left")
        .join(hbm_fits, on=["model_name", "platform"], how="left")
        .with_columns(
            # the twin first: the recommender answers for it with its gpu_hbm option's figures
            pl.when((pl.col("placement") == "hybrid") & pl.col("hbm_fits").fill_null(False))
            .then(pl.lit("same_as_gpu_hbm"))
            .when(pl.col("fits"))
            .then(pl.lit("value"))
            .when(pl.col("fits").not_())
            .then(pl.lit("no_fit"))
            .otherwise(pl.lit("not_ranked"))
            .alias("cell")
        )
        .with_columns(pl.col("cell").replace_strict(CELL_TEXT, default="").alias("cell_text"))
        .sort("model_name", "option")
    )


def fit_matrix(recs: pl.DataFrame) -> alt.Chart:
    """Workload x platform/placement: predicted throughput and throughput per watt, each with its own colour
    scale and legend (units in the titles); a cell without a value says why (``fit_cells``)."""
    d = fit_cells(recs)
    views = []
    for field, title, unit, fmt in (
        ("p50_throughput_eps", "Predicted throughput, P50", "examples/s", ",.0f"),
        ("eps_per_w", "Throughput per provisioned watt", "examples/s per W", ",.1f"),
    ):
        base = alt.Chart(d, title=f"{title} ({unit})").encode(
            x=alt.X("option:N", title=None, axis=alt.Axis(labelAngle=-40, labelLimit=160)),
            y=alt.Y("model_name:N", title=None),
        )
        cells = (
            base.transform_filter(alt.datum.cell == "value")
            .mark_rect()
            .encode(
                color=alt.Color(
                    f"{field}:Q",
                    scale=alt.Scale(scheme="blues", type="log"),
                    legend=alt.Legend(title=unit, format="~s", orient="right"),
                ),
                tooltip=[
                    "model_name:N",
                    "option:N",
                    alt.Tooltip(f"{field}:Q", format=fmt, title=unit),
                    "bottleneck:N",
                    alt.Tooltip("headroom:Q", format=".0%"),
                ],
            )
        )
        missing = (
            base.transform_filter(alt.datum.cell != "value")
            .mark_rect(color="#eeeeee")
            .encode(
                tooltip=[
                    "model_name:N",
                    "option:N",
                    alt.Tooltip("cell_text:N", title="why no value"),
                    alt.Tooltip("shortfall_gb:Q", format=",.0f"),
                ]
            )
        )
        labels = (
            base.transform_calculate(
                label=f"datum.cell === 'value' ? format(datum.{field}, '.3~s') : datum.cell_text"
            )
            .mark_text(fontSize=10)
            .encode(text="label:N")
        )
        views.append(
            (cells + missing + labels).properties(width=720, height=26 * max(d["model_name"].n_unique(), 1))
        )
    return alt.vconcat(*views).resolve_scale(color="independent")


def cpu_vs_big_basin(recs: pl.DataFrame) -> alt.Chart:
    """The paper's Table III setting: each model's best option on CPU clusters vs on Big Basin."""
    d = best_per_platform(recs, ("cpu", "big_basin"))
    platforms = color_scale(d["platform"].unique().to_list(), PLATFORM_COLORS)
    return (
        alt.Chart(d, title="CPU cluster vs Big Basin: best option per model (Table III setting)")
        .mark_bar()
        .encode(
            x=alt.X("model_name:N", title=None),
            xOffset="platform:N",
            y=alt.Y("p50_throughput_eps:Q", title="predicted examples/s (P50)", axis=alt.Axis(format="~s")),
            color=alt.Color("platform:N", scale=platforms),
            tooltip=[
                "model_name:N",
                "platform:N",
                "placement:N",
                alt.Tooltip("p50_throughput_eps:Q", format=",.0f", title="examples/s"),
                alt.Tooltip("eps_per_w:Q", format=",.1f", title="examples/s per W"),
                "bottleneck:N",
            ],
        )
        .properties(width=720, height=180)
    )


def best_per_platform(recs: pl.DataFrame, platforms: tuple[str, ...]) -> pl.DataFrame:
    """Per model, the fitting option of the highest predicted throughput on each of ``platforms``."""
    return (
        recs.filter(
            (pl.col("objective") == "throughput") & pl.col("fits") & pl.col("platform").is_in(platforms)
        )
        .sort("p50_throughput_eps", descending=True)
        .group_by("model_name", "platform", maintain_order=True)
        .first()
        .sort("model_name", "platform")
    )
