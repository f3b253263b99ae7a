"""Altair chart builders. Each takes small, already-aggregated frames (histograms, counts, predictions),
never raw samples, so a chart's size and build time stay flat as the fleet grows."""

from __future__ import annotations

import altair as alt
import polars as pl

ROLE_COLORS = alt.Scale(
    domain=["trainer", "sparse_ps", "dense_ps", "reader"], range=["#1f77b4", "#d62728", "#ff7f0e", "#7f7f7f"]
)
PLATFORM_COLORS = alt.Scale(domain=["cpu", "big_basin", "zion"], range=["#ff7f0e", "#1f77b4", "#2ca02c"])
COARSE_BINS = 100


def _selector(field: str, options: list[str], name: str) -> alt.Parameter:
    return alt.param(
        name=name,
        value=options[0] if options else None,
        bind=alt.binding_select(options=options, name=f"{field.replace('_', ' ')}: "),
    )


def trainer_vs_ps(dist: pl.DataFrame, n_bins: int) -> alt.Chart:
    """Fig. 5 view: ECDF of per-sample utilisation, trainers vs parameter servers, per resource, one model
    on CPU clusters at a time (selector), medians and p95 marked."""
    d = (
        dist.filter(
            (pl.col("statistic") == "sample")
            & (pl.col("platform") == "cpu")
            & pl.col("role").is_in(["trainer", "sparse_ps"])
            & pl.col("resource").is_in(["cpu", "mem_cap", "mem_bw", "net_bw"])
        )
        .with_columns((pl.col("bin").cast(pl.Int32) * COARSE_BINS // n_bins).alias("cbin"))
        .group_by("model_name", "role", "resource", "cbin")
        .agg(pl.col("n").sum())
        .sort("model_name", "role", "resource", "cbin")
        .with_columns(
            (pl.col("n").cum_sum() / pl.col("n").sum()).over("model_name", "role", "resource").alias("ecdf"),
            ((pl.col("cbin") + 1) / COARSE_BINS).alias("utilisation"),
        )
    )
    marks = (
        d.with_columns((pl.col("ecdf") >= 0.5).alias("p50"), (pl.col("ecdf") >= 0.95).alias("p95"))
        .group_by("model_name", "role", "resource")
        .agg(
            pl.col("utilisation").filter(pl.col("p50")).min().alias("median"),
            pl.col("utilisation").filter(pl.col("p95")).min().alias("p95"),
        )
        .unpivot(
            index=["model_name", "role", "resource"],
            on=["median", "p95"],
            variable_name="mark",
            value_name="utilisation",
        )
    )
    models = sorted(d["model_name"].unique().to_list())
    pick = _selector("model_name", models, "tvp_model")
    both = pl.concat(
        [
            d.select(
                "model_name",
                "role",
                "resource",
                "utilisation",
                "ecdf",
                pl.lit("ecdf").alias("kind"),
                pl.lit(None, pl.String).alias("mark"),
            ),
            marks.select(
                "model_name",
                "role",
                "resource",
                "utilisation",
                pl.lit(None, pl.Float64).alias("ecdf"),
                pl.lit("mark").alias("kind"),
                "mark",
            ),
        ]
    )
    base = alt.Chart().transform_filter(alt.datum.model_name == pick)
    lines = (
        base.transform_filter(alt.datum.kind == "ecdf")
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("utilisation:Q", scale=alt.Scale(domain=[0, 1]), title="utilisation"),
            y=alt.Y("ecdf:Q", title="share of samples <= x"),
            color=alt.Color("role:N", scale=ROLE_COLORS),
            tooltip=[
                "role:N",
                alt.Tooltip("utilisation:Q", format=".2f"),
                alt.Tooltip("ecdf:Q", format=".2f"),
            ],
        )
    )
    rules = (
        base.transform_filter(alt.datum.kind == "mark")
        .mark_rule()
        .encode(
            x="utilisation:Q",
            color=alt.Color("role:N", scale=ROLE_COLORS),
            strokeDash=alt.StrokeDash(
                "mark:N", scale=alt.Scale(domain=["median", "p95"], range=[[4, 2], [1, 3]])
            ),
            tooltip=["role:N", "mark:N", alt.Tooltip("utilisation:Q", format=".2f")],
        )
    )
    return (
        alt.layer(lines, rules, data=both)
        .properties(width=230, height=160)
        .facet(facet=alt.Facet("resource:N", title=None), columns=4)
        .add_params(pick)
        .properties(
            title="Trainers vs sparse parameter servers on CPU clusters (ECDF; dashed: median, dotted: p95)"
        )
    )


def server_counts(hist: pl.DataFrame) -> alt.Chart:
    """Figs. 8-9 view: runs per server count of each role, one platform at a time (selector)."""
    merged = (
        hist.group_by("platform", "role", "n_servers").agg(pl.col("n_runs").sum()).sort("role", "n_servers")
    )
    platforms = sorted(merged["platform"].unique().to_list())
    pick = _selector("platform", platforms, "count_platform")
    return (
        alt.Chart(merged, title="Servers per run (Figs. 8-9 of the paper)")
        .mark_bar()
        .encode(
            x=alt.X("n_servers:Q", bin=alt.Bin(maxbins=40), title="servers in the run"),
            y=alt.Y("sum(n_runs):Q", title="runs"),
            color=alt.Color("platform:N", scale=PLATFORM_COLORS),
            tooltip=[
                "role:N",
                "platform:N",
                alt.Tooltip("n_servers:Q", bin=alt.Bin(maxbins=40)),
                alt.Tooltip("sum(n_runs):Q", title="runs"),
            ],
        )
        .transform_filter(alt.datum.platform == pick)
        .properties(width=230, height=140)
        .facet(facet=alt.Facet("role:N", title=None), columns=4)
        .add_params(pick)
        .resolve_scale(y="independent")
    )


def fit_matrix(recs: pl.DataFrame) -> alt.Chart:
    """Workload x platform/placement: predicted throughput and throughput per watt; cells that do not fit marked."""
    d = recs.filter(pl.col("objective") == "throughput").with_columns(
        pl.format("{}/{}", "platform", "placement").alias("option"),
        pl.when(pl.col("fits")).then(pl.lit("")).otherwise(pl.lit("does not fit")).alias("fit_label"),
    )
    views = []
    for field, title, fmt in (
        ("p50_throughput_eps", "Predicted throughput (examples/s, P50)", ",.0f"),
        ("eps_per_w", "Throughput per provisioned watt", ".1f"),
    ):
        base = alt.Chart(d, title=title).encode(
            x=alt.X("option:N", title=None, axis=alt.Axis(labelAngle=-40)),
            y=alt.Y("model_name:N", title=None),
        )
        cells = base.mark_rect().encode(
            color=alt.Color(f"{field}:Q", scale=alt.Scale(scheme="blues", type="log"), title=None),
            tooltip=[
                "model_name:N",
                "option:N",
                alt.Tooltip(f"{field}:Q", format=fmt),
                "bottleneck:N",
                alt.Tooltip("headroom:Q", format=".0%"),
                "fits:N",
            ],
        )
        missing = base.mark_rect(color="#eeeeee").transform_filter(~alt.datum.fits)
        labels = base.mark_text(fontSize=10).encode(
            text=alt.condition(alt.datum.fits, alt.Text(f"{field}:Q", format=".3s"), alt.value("✕ no fit"))
        )
        views.append(
            (cells + missing + labels).properties(width=420, height=26 * max(d["model_name"].n_unique(), 1))
        )
    return alt.vconcat(*views)


def whatif_sweeps(sweeps: pl.DataFrame) -> alt.Chart:
    """Figs. 10-13 view: test-suite throughput vs one varied field, CPU vs Big Basin vs Zion (model predictions)."""
    return (
        alt.Chart(sweeps, title="What-if sweeps of the configurable test suite (workload model)")
        .mark_line(point=True)
        .encode(
            x=alt.X("value:Q", scale=alt.Scale(type="log", base=2), title=None),
            y=alt.Y("throughput_eps:Q", scale=alt.Scale(type="log"), title="examples/s"),
            color=alt.Color("platform:N", scale=PLATFORM_COLORS),
            tooltip=[
                "field:N",
                "value:Q",
                "platform:N",
                alt.Tooltip("throughput_eps:Q", format=",.0f"),
                "bottleneck:N",
            ],
        )
        .properties(width=240, height=150)
        .facet(facet=alt.Facet("field:N", title=None), columns=3)
        .resolve_scale(x="independent", y="independent")
    )


def placement_comparison(placements: pl.DataFrame) -> alt.Chart:
    """Fig. 14 view: each production model on Big Basin and Zion, every placement (model predictions)."""
    return (
        alt.Chart(placements, title="Embedding placement on Big Basin and Zion (Fig. 14 view)")
        .mark_bar()
        .encode(
            x=alt.X("placement:N", title=None, axis=alt.Axis(labelAngle=-30)),
            y=alt.Y("throughput_eps:Q", title="examples/s"),
            color=alt.Color("platform:N", scale=PLATFORM_COLORS),
            xOffset="platform:N",
            tooltip=[
                "model_name:N",
                "platform:N",
                "placement:N",
                alt.Tooltip("throughput_eps:Q", format=",.0f"),
                "bottleneck:N",
                "fits:N",
            ],
        )
        .properties(width=220, height=160)
        .facet(facet=alt.Facet("model_name:N", title=None), columns=3)
        .resolve_scale(y="independent")
    )


def calibration(results: pl.DataFrame) -> alt.Chart:
    """Numeric targets as model / paper ratios, with the tolerance band around 1 (PASS green, FAIL red)."""
    d = results.filter(pl.col("target").is_not_null() & (pl.col("target") != 0)).with_columns(
        (pl.col("model") / pl.col("target")).alias("ratio"),
        (pl.col("low") / pl.col("target")).alias("band_low"),
        (pl.col("high") / pl.col("target")).alias("band_high"),
    )
    base = alt.Chart(d, title="Calibration: workload model / paper value (grey: tolerance)").encode(
        y=alt.Y("label:N", title=None, sort=None)
    )
    band = base.mark_rule(strokeWidth=9, opacity=0.35, color="#888888").encode(
        x=alt.X("band_low:Q", title="model / paper", scale=alt.Scale(zero=False)), x2="band_high:Q"
    )
    dots = base.mark_point(filled=True, size=70).encode(
        x="ratio:Q",
        color=alt.Color("status:N", scale=alt.Scale(domain=["PASS", "FAIL"], range=["#2ca02c", "#d62728"])),
        tooltip=["id:N", "label:N", "target:Q", "model:Q", "status:N"],
    )
    return (band + dots).properties(width=420, height=20 * max(d.height, 1))


def trends(daily: pl.DataFrame) -> alt.Chart:
    """Fleet over days: runs, quarantined rows and median throughput per model."""
    base = alt.Chart(daily).encode(x=alt.X("day:T", title=None))
    runs = base.mark_bar(color="#1f77b4").encode(
        y=alt.Y("sum(runs):Q", title="runs"), tooltip=["day:T", alt.Tooltip("sum(runs):Q", title="runs")]
    )
    quarantined = base.mark_bar(color="#d62728").encode(
        y=alt.Y("max(rows_quarantined):Q", title="rows quarantined"),
        tooltip=["day:T", alt.Tooltip("max(rows_quarantined):Q", title="quarantined")],
    )
    thr = base.mark_line(point=True).encode(
        y=alt.Y("median_throughput_eps:Q", title="median examples/s"),
        color="model_name:N",
        tooltip=["day:T", "model_name:N", alt.Tooltip("median_throughput_eps:Q", format=",.0f")],
    )
    return alt.hconcat(
        runs.properties(width=220, height=130, title="Runs per day"),
        quarantined.properties(width=220, height=130, title="Quarantined rows per day"),
        thr.properties(width=260, height=130, title="Median throughput per model"),
    )


def run_explorer(runs: pl.DataFrame) -> alt.Chart:
    """Linked selection: brush runs on trainer vs PS mean CPU utilisation; the table lists the brushed runs."""
    brush = alt.selection_interval(name="runs_brush", encodings=["x", "y"])
    points = (
        alt.Chart(runs, title="Runs: trainer vs sparse-PS mean CPU utilisation (drag to select)")
        .mark_circle(size=40, opacity=0.7)
        .encode(
            x=alt.X("trainer_cpu:Q", title="trainer mean CPU", scale=alt.Scale(domain=[0, 1])),
            y=alt.Y("ps_cpu:Q", title="sparse-PS mean CPU", scale=alt.Scale(domain=[0, 1])),
            color=alt.condition(brush, alt.Color("model_name:N"), alt.value("#cccccc")),
            tooltip=[
                "run_id:N",
                "model_name:N",
                "n_trainers:Q",
                "n_sparse_ps:Q",
                alt.Tooltip("throughput_eps:Q", format=",.0f"),
            ],
        )
        .add_params(brush)
        .properties(width=300, height=220)
    )
    table = (
        alt.Chart(runs)
        .mark_text(align="left", fontSize=10)
        .encode(y=alt.Y("row:O", axis=None), text=alt.Text("line:N"))
        .transform_filter(brush)
        .transform_window(row="row_number()")
        .transform_filter(alt.datum.row <= 15)
        .properties(width=380, height=220, title="Selected runs (first 15)")
    )
    return alt.hconcat(points, table)
