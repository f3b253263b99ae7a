"""Altair chart builders. Each takes small, already-aggregated frames (histograms, counts, predictions),
never raw samples, so a chart's size and build time stay flat as the fleet grows."""

from __future__ import annotations

import hashlib

import altair as alt
import polars as pl

from pipelines.lib.contracts import resources

UNKNOWN_MODEL = "(unknown model)"  # runs whose source names no model (public traces)
# Fixed colours for the paper's roles, platforms and models, so they match across charts; any other value seen
# in the data (a platform of a public trace, a model of your own) gets a colour of EXTRA_COLORS chosen by its
# name alone: the same in every chart and every report, whatever else is in the data.
ROLE_COLORS = {"trainer": "#1f77b4", "sparse_ps": "#d62728", "dense_ps": "#ff7f0e", "reader": "#7f7f7f"}
PLATFORM_COLORS = {"cpu": "#ff7f0e", "big_basin": "#1f77b4", "zion": "#2ca02c"}
MODEL_COLORS = {"M1prod": "#4c78a8", "M2prod": "#f58518", "M3prod": "#e45756", UNKNOWN_MODEL: "#8c8c8c"}
EXTRA_COLORS = [
    "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#393b79", "#637939", "#843c39",
    "#7b4173", "#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363", "#a55194", "#6b6ecf",
]  # fmt: skip
COARSE_BINS = 50  # the ECDFs' steps (0.02 utilisation): fine at chart size, and half the daily rows
# The report's date-range control sets these two parameters (YYYY-MM-DD) in every chart that has days.
DAY_FROM, DAY_TO = "day_from", "day_to"
IN_RANGE = f"datum.day >= {DAY_FROM} && datum.day <= {DAY_TO}"


def stable_color(name: str) -> str:
    """A colour of EXTRA_COLORS fixed by the name alone (never by what else is present)."""
    return EXTRA_COLORS[int(hashlib.sha256(name.encode()).hexdigest(), 16) % len(EXTRA_COLORS)]


def color_scale(values, known: dict[str, str]) -> alt.Scale:
    """An ordinal colour scale whose domain is exactly the values present (known ones first, in order)."""
    present = {v for v in values if v is not None}
    domain = [k for k in known if k in present] + sorted(present - set(known))
    return alt.Scale(domain=domain, range=[known.get(v) or stable_color(v) for v in domain])


def day_range(days: list[str]) -> list[alt.Parameter]:
    """The two parameters the date-range control sets (all ``days`` to start with)."""
    return [alt.param(name=DAY_FROM, value=days[0]), alt.param(name=DAY_TO, value=days[-1])]


def _ranged(chart, days: list[str] | None):
    """``chart`` with the date-range parameters at its top level (not for static exports: ``days`` None)."""
    return chart.add_params(*day_range(days)) if days else chart


def _in_range(chart, days: list[str] | None):
    """``chart`` keeping the rows of the days in the control's range (every row for static exports)."""
    return chart.transform_filter(IN_RANGE) if days else chart


def _selector(field: str, options: list[str], name: str, default: str | None = None) -> alt.Parameter:
    return alt.param(
        name=name,
        value=default if default in options else (options[0] if options else None),
        bind=alt.binding_select(options=options, name=f"{field.replace('_', ' ')}: "),
    )


def compact_data(frame: pl.DataFrame) -> alt.InlineData:
    """``frame`` inlined as CSV text with its column types: daily aggregates in about half the bytes of JSON
    records (the report holds up to a month of them)."""
    parse = {c: "number" if t.is_numeric() else "string" for c, t in frame.schema.items()}
    return alt.InlineData(values=frame.write_csv(), format=alt.DataFormat(type="csv", parse=parse))


def _ecdf_transforms(chart, groups: list[str]):
    """Vega-Lite transforms from per-day coarse-bin counts to an ECDF per ``groups`` (the days in range
    are summed first, so the ECDF answers for any range without the report holding more than daily bins)."""
    return (
        chart.transform_aggregate(n="sum(n)", groupby=[*groups, "cbin"])
        .transform_window(cum="sum(n)", sort=[alt.SortField("cbin")], groupby=groups, frame=[None, 0])
        .transform_joinaggregate(total="sum(n)", groupby=groups)
        .transform_calculate(ecdf="datum.cum / datum.total", utilisation=f"(datum.cbin + 1) / {COARSE_BINS}")
    )


def _tvp_bins(dist: pl.DataFrame, n_bins: int, platforms: tuple[str, ...]) -> pl.DataFrame:
    """The trainer-vs-PS view's samples in coarse bins, per day, model (a model on a platform when there are
    several platforms), role and resource."""
    return (
        dist.filter(
            (pl.col("statistic") == "sample")
            & pl.col("platform").is_in(list(platforms))
            & pl.col("role").is_in(["trainer", "sparse_ps"])
            & pl.col("resource").is_in(list(resources()))
        )
        .with_columns(  # with several platforms, one selector state is a model on a platform
            pl.format("{} on {}", "model_name", "platform").alias("model_name")
            if len(platforms) > 1
            else pl.col("model_name")
        )
        .with_columns(
            (pl.col("bin").cast(pl.Int32) * COARSE_BINS // n_bins).alias("cbin"),
            pl.col("day").cast(pl.String),
        )
        .group_by("day", "model_name", "role", "resource", "cbin")
        .agg(pl.col("n").sum())
        .filter(pl.col("n") > 0)
        .sort("day", "model_name", "role", "resource", "cbin")
    )


def _roles_by_model(d: pl.DataFrame, order: list[str]) -> dict[str, list[str]]:
    """The roles each model's rows have, in ``order`` (the legend's)."""
    present = (
        d.select("model_name", pl.col("role").cast(pl.Enum(order)))
        .unique()
        .sort("model_name", "role")
        .group_by("model_name", maintain_order=True)
        .agg("role")
    )
    return dict(zip(present["model_name"].to_list(), present["role"].to_list(), strict=True))


def trainer_vs_ps(
    dist: pl.DataFrame,
    n_bins: int,
    static: bool = False,
    days: list[str] | None = None,
    platforms: tuple[str, ...] = ("cpu",),
    title: str = "Trainers vs sparse parameter servers on CPU clusters",
) -> alt.Chart:
    """Fig. 5 view: ECDF of per-sample utilisation, trainers vs parameter servers, per resource, one model
    of ``platforms`` at a time (selector), medians and p95 marked; over the days of the date-range control
    (``days``: the days it offers). The resources are the contract's (schemas/utilisation_samples.yaml)
    that these runs reported, in its order. The legend lists only the roles the data has (on the page:
    the roles of the model selected)."""
    d = _tvp_bins(dist, n_bins, platforms)
    models = sorted(d["model_name"].unique().to_list())
    pick = _selector("model_name", models, "tvp_model")
    roles = color_scale(d["role"].unique().to_list(), ROLE_COLORS)
    # the colours stay fixed by role; on the page, a model whose runs have no sparse PS lists none
    legend = alt.Undefined if static else alt.Legend(values=alt.ExprRef(f"tvp_roles[{pick.name}]"))
    color = alt.Color("role:N", scale=roles, legend=legend)
    groups = ["model_name", "role", "resource"]
    base = alt.Chart()
    if not static:
        base = _in_range(base, days).transform_filter(alt.datum.model_name == pick)
    ecdf = _ecdf_transforms(base, groups)
    lines = ecdf.mark_line(interpolate="step-after").encode(
        x=alt.X("utilisation:Q", scale=alt.Scale(domain=[0, 1]), title="utilisation"),
        y=alt.Y("ecdf:Q", title="share of samples <= x"),
        color=color,
        tooltip=["role:N", alt.Tooltip("utilisation:Q", format=".2f"), alt.Tooltip("ecdf:Q", format=".2f")],
    )
    shown = [r for r in resources() if r in set(d["resource"].to_list())]
    marks = [
        ecdf.transform_filter(f"datum.ecdf >= {share}")
        .transform_aggregate(utilisation="min(utilisation)", groupby=groups)
        .transform_calculate(mark=f"'{name}'")
        .mark_rule()
        .encode(
            x="utilisation:Q",
            color=color,
            strokeDash=alt.StrokeDash(
                "mark:N", scale=alt.Scale(domain=["median", "p95"], range=[[4, 2], [1, 3]])
            ),
            tooltip=["role:N", "mark:N", alt.Tooltip("utilisation:Q", format=".2f")],
        )
        for name, share in (("median", 0.5), ("p95", 0.95))
    ]
    title = f"{title} (ECDF; dashed: median, dotted: p95)"
    layered = alt.layer(lines, *marks, data=compact_data(d))
    if static:  # exports: every model, not one selector state
        return (
            layered.properties(width=150, height=110)
            .facet(
                row=alt.Row("model_name:N", title=None),
                column=alt.Column("resource:N", title=None, sort=shown),
            )
            .properties(title=title)
        )
    return _ranged(
        layered.properties(width=340, height=150)
        .facet(facet=alt.Facet("resource:N", title=None, sort=shown), columns=2)
        .add_params(pick, alt.param(name="tvp_roles", value=_roles_by_model(d, roles.domain)))
        .properties(title=title),
        days,
    )


def server_counts(hist: pl.DataFrame, static: bool = False, days: list[str] | None = None) -> alt.Chart:
    """Figs. 8-9 view: runs per server count of each role, one platform at a time (selector, CPU clusters
    first: there trainer and PS counts vary); roles a platform does not use (count 0 only) are left out."""
    merged = (
        hist.filter(pl.col("n_servers") > 0)
        .with_columns(pl.col("day").cast(pl.String))
        .group_by("day", "platform", "role", "n_servers")
        .agg(pl.col("n_runs").sum())
        .sort("day", "role", "n_servers")
    )
    platforms = color_scale(merged["platform"].unique().to_list(), PLATFORM_COLORS)
    pick = _selector("platform", platforms.domain, "count_platform", default="cpu")
    title = "Servers per run (Figs. 8-9 of the paper)"
    chart = (
        alt.Chart(merged)
        .mark_bar()
        .encode(
            x=alt.X("n_servers:Q", bin=alt.Bin(maxbins=40), title="servers in the run"),
            y=alt.Y("sum(n_runs):Q", title="runs"),
            color=alt.Color("platform:N", scale=platforms),
            tooltip=[
                "role:N",
                "platform:N",
                alt.Tooltip("n_servers:Q", bin=alt.Bin(maxbins=40), title="servers"),
                alt.Tooltip("sum(n_runs):Q", title="runs"),
            ],
        )
    )
    if static:  # exports: every platform as a row of small multiples, one title over them all
        return (
            chart.properties(width=170, height=90)
            .facet(row=alt.Row("platform:N", title=None), column=alt.Column("role:N", title=None))
            .resolve_scale(y="independent")
            .properties(title=title)
        )
    return _ranged(
        _in_range(chart, days)
        .transform_filter(alt.datum.platform == pick)
        .properties(width=340, height=130)
        .facet(facet=alt.Facet("role:N", title=None), columns=2)
        .add_params(pick)
        .resolve_scale(y="independent")
        .properties(title=title),
        days,
    )


SWEEP_AXES = {
    "dense features": "dense features per example",
    "sparse features": "sparse features (tables) per example",
    "batch size": "batch size (examples)",
    "rows per table": "rows per embedding table",
    "MLP width": "MLP layer width (units)",
}


# Sweep axes show the values swept, as plain numbers with thousands separators ("1,024", "51,200") or, for
# whole thousands and millions, short ("100k", "25M"): never "1.024k" or "1.048576M".
SWEEP_LABEL = "datum.value % 1000 === 0 ? format(datum.value, '~s') : format(datum.value, ',')"


def whatif_sweeps(sweeps: pl.DataFrame) -> alt.Chart:
    """Figs. 10-13 view: test-suite throughput vs one varied field, per platform (model predictions)."""
    platforms = color_scale(sweeps["platform"].unique().to_list(), PLATFORM_COLORS)
    panels = []
    for field in sweeps["field"].unique(maintain_order=True).to_list():
        d = sweeps.filter(pl.col("field") == field)
        panels.append(
            alt.Chart(d, title=field)
            .mark_line(point=True)
            .encode(
                x=alt.X(
                    "value:Q",
                    scale=alt.Scale(type="log", base=2),
                    title=SWEEP_AXES.get(field, field),
                    axis=alt.Axis(
                        values=sorted(d["value"].unique().to_list()),
                        labelExpr=SWEEP_LABEL,
                        labelOverlap="greedy",
                    ),
                ),
                y=alt.Y(
                    "throughput_eps:Q",
                    scale=alt.Scale(type="log"),
                    title="examples/s",
                    axis=alt.Axis(format="~s", labelOverlap="greedy"),
                ),
                color=alt.Color("platform:N", scale=platforms),
                tooltip=[
                    "field:N",
                    alt.Tooltip("value:Q", format=",.0f"),
                    "platform:N",
                    alt.Tooltip("throughput_eps:Q", format=",.0f", title="examples/s"),
                    "bottleneck:N",
                ],
            )
            .properties(width=340, height=140)
        )
    return alt.concat(
        *panels, columns=2, title="What-if sweeps of the configurable test suite (workload model)"
    )


def placement_comparison(placements: pl.DataFrame) -> alt.Chart:
    """Fig. 14 view: each production model on Big Basin and Zion, every placement (model predictions)."""
    platforms = color_scale(placements["platform"].unique().to_list(), PLATFORM_COLORS)
    return (
        alt.Chart(placements, title="Embedding placement on Big Basin and Zion (Fig. 14 view)")
        .mark_bar()
        .encode(
            x=alt.X("placement:N", title=None, axis=alt.Axis(labelAngle=-30)),
            y=alt.Y("throughput_eps:Q", title="examples/s", axis=alt.Axis(format="~s")),
            color=alt.Color("platform:N", scale=platforms),
            xOffset="platform:N",
            tooltip=[
                "model_name:N",
                "platform:N",
                "placement:N",
                alt.Tooltip("throughput_eps:Q", format=",.0f", title="examples/s"),
                "bottleneck:N",
                "fits:N",
            ],
        )
        .properties(width=220, height=150)
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
        y=alt.Y("label:N", title=None, sort=None, axis=alt.Axis(labelLimit=380))
    )
    band = base.mark_rule(strokeWidth=9, opacity=0.35, color="#888888").encode(
        x=alt.X("band_low:Q", title="model / paper", scale=alt.Scale(zero=False)), x2="band_high:Q"
    )
    dots = base.mark_point(filled=True, size=70).encode(
        x="ratio:Q",
        color=alt.Color("status:N", scale=alt.Scale(domain=["PASS", "FAIL"], range=["#2ca02c", "#d62728"])),
        tooltip=["id:N", "label:N", "target:Q", "model:Q", "status:N"],
    )
    return (band + dots).properties(width=560, height=20 * max(d.height, 1))


def platforms_without_throughput(daily: pl.DataFrame) -> list[str]:
    """Platforms whose runs report no throughput in these days (public traces publish none)."""
    has = daily.group_by("platform").agg(pl.col("median_throughput_eps").is_not_null().any().alias("has"))
    return sorted(has.filter(~pl.col("has") & pl.col("platform").is_not_null())["platform"].to_list())


def trends(daily: pl.DataFrame, days: list[str] | None = None) -> alt.Chart:
    """Fleet over days: runs per day, quarantined rows per day (only when some were), and the median
    throughput per model on each platform whose runs report one (CPU and GPU runs are not mixed)."""
    d = daily.with_columns(pl.col("day").cast(pl.String))
    x = alt.X("day:O", title=None, axis=alt.Axis(labelAngle=-40))
    per_day = d.group_by("day").agg(pl.col("runs").sum(), pl.col("rows_quarantined").max()).sort("day")
    size = {"width": 340, "height": 130}
    panels = [
        _in_range(alt.Chart(per_day, title="Runs per day"), days)
        .mark_bar(color="#1f77b4")
        .encode(x=x, y=alt.Y("runs:Q", title="runs"), tooltip=["day:O", "runs:Q"])
        .properties(**size)
    ]
    if per_day["rows_quarantined"].sum():
        panels.append(
            _in_range(alt.Chart(per_day, title="Quarantined rows per day"), days)
            .mark_bar(color="#d62728")
            .encode(x=x, y=alt.Y("rows_quarantined:Q", title="rows"), tooltip=["day:O", "rows_quarantined:Q"])
            .properties(**size)
        )
    models = color_scale(d["model_name"].unique().to_list(), MODEL_COLORS)
    silent = set(platforms_without_throughput(daily))
    for platform in sorted(set(d["platform"].drop_nulls().unique().to_list()) - silent):
        panels.append(
            _in_range(
                alt.Chart(
                    d.filter(pl.col("platform") == platform), title=f"Median throughput per model: {platform}"
                ),
                days,
            )
            .mark_line(point=True)
            .encode(
                x=x,
                y=alt.Y("median_throughput_eps:Q", title="examples/s", axis=alt.Axis(format="~s")),
                color=alt.Color("model_name:N", title="model", scale=models),
                tooltip=[
                    "day:O",
                    "model_name:N",
                    alt.Tooltip("median_throughput_eps:Q", format=",.0f", title="examples/s"),
                ],
            )
            .properties(**size)
        )
    return _ranged(alt.concat(*panels, columns=2).resolve_scale(color="shared"), days)


def run_explorer(runs: pl.DataFrame, days: list[str] | None = None) -> alt.Chart:
    """Linked selection: brush runs on trainer vs PS mean CPU utilisation; the list shows how many runs are
    selected and the first 15 of them (runs of the days in the date range only)."""
    brush = alt.selection_interval(name="runs_brush", encodings=["x", "y"])
    runs = runs.with_columns(pl.col("day").cast(pl.String))
    models = color_scale(runs["model_name"].unique().to_list(), MODEL_COLORS)
    points = (
        _in_range(alt.Chart(runs, title="Runs: trainer vs sparse-PS mean CPU (drag to select)"), days)
        .mark_circle(size=40, opacity=0.7)
        .encode(
            x=alt.X("trainer_cpu:Q", title="trainer mean CPU", scale=alt.Scale(domain=[0, 1])),
            y=alt.Y("ps_cpu:Q", title="sparse-PS mean CPU", scale=alt.Scale(domain=[0, 1])),
            color=alt.condition(
                brush,
                alt.Color(
                    "model_name:N",
                    title="model",
                    scale=models,
                    legend=alt.Legend(orient="bottom", labelLimit=150),
                ),
                alt.value("#cccccc"),
            ),
            tooltip=[
                "run_id:N",
                "day:N",
                "model_name:N",
                "n_trainers:Q",
                "n_sparse_ps:Q",
                alt.Tooltip("throughput_eps:Q", format=",.0f"),
                "status:N",
            ],
        )
        .add_params(brush)
        .properties(width=330, height=220)
    )
    selected = _in_range(alt.Chart(runs), days).transform_filter(brush)
    count = (
        selected.transform_aggregate(n="count()")
        .transform_calculate(text="datum.n + (datum.n === 1 ? ' run selected' : ' runs selected')")
        .mark_text(align="left", fontSize=11, fontWeight="bold")
        .encode(text="text:N", x=alt.value(0))
        .properties(width=LIST_WIDTH, height=16)
    )
    table = (
        selected.transform_window(row="row_number()")
        .transform_filter(alt.datum.row <= 15)
        .mark_text(align="left", fontSize=10, limit=LIST_WIDTH)  # lines are cut at the list's width
        .encode(y=alt.Y("row:O", axis=None), x=alt.value(0), text=alt.Text("line:N"))
        .properties(width=LIST_WIDTH, height=200, title="Selected runs (first 15)")
    )
    return _ranged(alt.hconcat(points, alt.vconcat(count, table, spacing=2)), days)


LIST_WIDTH = 420  # the selected-runs list (its text is cut at this width, scaled with the chart)


def waste(efficiency: pl.DataFrame, days: list[str] | None = None) -> alt.Chart:
    """Where the fleet wastes machines: servers recoverable per day and per model and platform, stacked by
    role (right-sized runs only; provisioned kW in the tooltips)."""
    judged = efficiency.filter(pl.col("right_sized_servers").is_not_null())
    sums = [
        pl.col("servers_recoverable").sum(),
        (pl.col("provisioned_w_recoverable").sum() / 1000).round(1).alias("provisioned_kw"),
    ]
    per_day = judged.group_by("day", "role").agg(sums).with_columns(pl.col("day").cast(pl.String))
    per_system = (
        judged.group_by("day", "model_name", "platform", "role")
        .agg(sums)
        .with_columns(
            pl.format("{} · {}", pl.col("model_name").fill_null(UNKNOWN_MODEL), "platform").alias("system"),
            pl.col("day").cast(pl.String),
        )
    )
    roles = color_scale(judged["role"].unique().to_list(), ROLE_COLORS)
    tip = [
        "role:N",
        alt.Tooltip("sum(servers_recoverable):Q", title="servers recoverable", format=","),
        alt.Tooltip("sum(provisioned_kw):Q", title="provisioned kW", format=",.1f"),
    ]
    by_day = (
        _in_range(alt.Chart(per_day, title="Servers recoverable per day"), days)
        .mark_bar()
        .encode(
            x=alt.X("day:O", title=None, axis=alt.Axis(labelAngle=-40)),
            y=alt.Y("sum(servers_recoverable):Q", title="servers"),
            color=alt.Color("role:N", scale=roles),
            tooltip=["day:O", *tip],
        )
        .properties(width=300, height=160)
    )
    by_system = (
        _in_range(alt.Chart(per_system, title="Servers recoverable per model and platform"), days)
        .mark_bar()
        .encode(
            y=alt.Y("system:N", title=None, sort="-x", axis=alt.Axis(labelLimit=160)),
            x=alt.X("sum(servers_recoverable):Q", title="servers"),
            color=alt.Color("role:N", scale=roles),
            tooltip=["system:N", *tip],
        )
        .properties(width=300, height=18 * max(per_system["system"].n_unique(), 1))
    )
    return _ranged(alt.hconcat(by_day, by_system).resolve_scale(color="shared"), days)
