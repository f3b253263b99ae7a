"""Right-sizing (``run_efficiency``), per run and role, from a day's aggregates (runs, run_role_stats,
server_windows): a run holds n servers of a role; the right-sized count is the smallest n' <= n at which every
resource's p95 utilisation, scaled by the load per server at n', stays at or under the target (a resource
already above it may not rise):

- ``workload_model`` (the run's workload is known and its platform modelled): the load per server at n' is
  the workload model's utilisation at n' over its utilisation at n; n' must also keep the recommender's
  SATURATION of the model's throughput and fit the tables, and is never below the recommender's
  binding-constraint count for the model family on the run's system (``sizing.size_servers``);
- ``utilisation_headroom`` (telemetry only: public traces, Prometheus): the load of the resources that
  spread over the servers (the contract's ``load_resources``) is spread evenly, so it scales by n / n';
- ``no_telemetry``: no samples for the role, not judged.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import polars as pl
import polars.selectors as cs

from pipelines.lib.analysis import analytics
from pipelines.lib.contracts import contract, resources
from pipelines.lib.query.sqlfiles import sql_text
from workload_model import fields
from workload_model.catalog import HardwareCatalog, ModelSpec
from workload_model.model import ROLES, UTIL_RESOURCES, predict_frame
from workload_model.sizing import SATURATION, batch_on, size_servers, workload_of_model

ROLE_COUNTS = dict(zip(ROLES, fields.SERVER_COUNTS, strict=True))  # role -> its count column in runs
SLACK = 1e-9  # float noise when a scaled p95 lands exactly on its limit
RUN_FIELDS = ("source", "model_name", "platform", "placement")
# What every sizing basis gives per run and role (a basis leaves out what it cannot say).
SIZED = {
    "run_id": pl.String,
    "role": pl.String,
    "n_servers": pl.Int32,
    "basis": pl.String,
    "right_sized_servers": pl.Int64,
    "recommender_servers": pl.Int32,
    "binding_resource": pl.String,
    "binding_p95_util": pl.Float64,
    "p95_after_util": pl.Float64,
    "limited_by": pl.String,
    "throughput_risk": pl.Float64,
}


@dataclass(frozen=True)
class Targets:
    """What right-sizing and outlier detection measure against (defaults: the contracts' parameters)."""

    target_p95_util: float
    straggler_ratio: float
    hot_shard_ratio: float
    sustained_share: float

    def __post_init__(self) -> None:
        checks = {
            "target_p95_util": 0 < self.target_p95_util <= 1,
            "straggler_ratio": 0 < self.straggler_ratio < 1,
            "hot_shard_ratio": self.hot_shard_ratio > 1,
            "sustained_share": 0 < self.sustained_share <= 1,
        }
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise ValueError(
                f"{', '.join(bad)} out of range: target_p95_util in (0, 1], straggler_ratio in (0, 1), "
                "hot_shard_ratio > 1, sustained_share in (0, 1]"
            )

    @classmethod
    def defaults(cls, **overrides: float) -> Targets:
        """The contracts' parameters (schemas/run_efficiency.yaml, schemas/server_outliers.yaml), with
        ``overrides``."""
        eff, out = contract("run_efficiency").parameters, contract("server_outliers").parameters
        values = {
            "target_p95_util": eff["target_p95_util"],
            **{k: out[k] for k in ("straggler_ratio", "hot_shard_ratio", "sustained_share")},
            **overrides,
        }
        return cls(**{k: float(v) for k, v in values.items()})


def load_resources() -> dict[str, tuple[str, ...]]:
    """Per role, the resources whose load spreads over the role's servers (run_efficiency's contract)."""
    return {r: tuple(v) for r, v in contract("run_efficiency").parameters["load_resources"].items()}


def run_efficiency(
    runs: pl.DataFrame,
    stats: pl.DataFrame,
    windows: analytics.Relation,
    day: str,
    hw: HardwareCatalog,
    models: dict[str, ModelSpec],
    targets: Targets,
) -> pl.DataFrame:
    """One day's right-sizing per run and role, from its runs, run_role_stats and server_windows."""
    with ThreadPoolExecutor(1) as beside:  # DuckDB frees the GIL: the imbalance SQL runs beside the sizing
        imbalance = beside.submit(_role_imbalance, windows)
        return _run_efficiency(runs, stats, imbalance, day, hw, models, targets)


def _role_imbalance(windows: analytics.Relation) -> pl.DataFrame:
    with analytics.connection(server_windows=windows) as con:
        return con.sql(sql_text("transforms/role_imbalance.sql")).pl()


def _run_efficiency(
    runs: pl.DataFrame,
    stats: pl.DataFrame,
    imbalance: Future[pl.DataFrame],
    day: str,
    hw: HardwareCatalog,
    models: dict[str, ModelSpec],
    targets: Targets,
) -> pl.DataFrame:
    pairs = _held(runs).join(_observed(stats), on=["run_id", "role"], how="left")
    seen = pl.any_horizontal(pl.col(f"p95_{r}").is_not_null() for r in resources())
    known = runs.filter(_workload_known(hw))
    now = _now(known, hw)
    by_model = pairs.filter(seen & pl.col("run_id").is_in(now["run_id"].implode()))
    parts = [
        _size_with_model(known, by_model, now, hw, models, targets.target_p95_util),
        _size_with_headroom(
            pairs.filter(seen & ~pl.col("run_id").is_in(by_model["run_id"].implode())),
            targets.target_p95_util,
        ),
        pairs.filter(~seen).select("run_id", "role", "n_servers", pl.lit("no_telemetry").alias("basis")),
    ]
    if not any(p.height for p in parts):
        return contract("run_efficiency").empty_frame()
    sized = pl.concat([pl.DataFrame(schema=SIZED), *(p for p in parts if p.height)], how="diagonal_relaxed")
    out = (
        pairs.select("run_id", "role", *RUN_FIELDS)
        .join(sized, on=["run_id", "role"])
        .join(
            imbalance.result().rename({"resource": "binding_resource"}),
            on=["run_id", "role", "binding_resource"],
            how="left",
        )
        .with_columns(
            pl.lit(day).str.to_date().alias("day"),
            pl.lit(targets.target_p95_util).alias("target_p95_util"),
            (pl.col("n_servers") - pl.col("right_sized_servers")).alias("servers_recoverable"),
        )
        .with_columns(_recoverable_watts(hw))
        .sort("run_id", "role")
    )
    return contract("run_efficiency").conform(
        out.with_columns(*[pl.col(c).fill_null("(unknown)") for c in ("model_name", "platform", "placement")])
    )


def _held(runs: pl.DataFrame) -> pl.DataFrame:
    """One row per run and role it holds servers of."""
    return (
        runs.select("run_id", *RUN_FIELDS, *ROLE_COUNTS.values())
        .unpivot(
            list(ROLE_COUNTS.values()),
            index=["run_id", *RUN_FIELDS],
            variable_name="role",
            value_name="n_servers",
        )
        .filter(pl.col("n_servers") > 0)
        .with_columns(pl.col("role").replace_strict({v: k for k, v in ROLE_COUNTS.items()}))
    )


def _observed(stats: pl.DataFrame) -> pl.DataFrame:
    """Per run and role: the observed p95 and max of every resource (null where not reported)."""
    wide = stats.select("run_id", "role", "resource", "p95_util", "max_util").pivot(
        on="resource", index=["run_id", "role"], values=["p95_util", "max_util"]
    )
    names = {f"{s}_util_{r}": f"{s}_{r}" for s in ("p95", "max") for r in resources()}
    wide = wide.rename({k: v for k, v in names.items() if k in wide.columns})
    missing = [pl.lit(None, pl.Float64).alias(v) for v in names.values() if v not in wide.columns]
    return wide.with_columns(missing)


def _workload_known(hw: HardwareCatalog) -> pl.Expr:
    """The run carries what the workload model needs, on a platform the model knows."""
    needed = [f for f in fields.shape_fields() if f != "lookup_power_law_alpha"]
    modelled = [p for p, spec in hw.platforms.items() if spec.modelled]
    return pl.col("platform").is_in(modelled) & pl.all_horizontal(
        pl.col([*needed, "batch_size", "placement", "model_name"]).is_not_null()
    )


def _now(known: pl.DataFrame, hw: HardwareCatalog) -> pl.DataFrame:
    """The workload model at each run's own counts: throughput and utilisation of every role and resource;
    runs the model gives no throughput (tables that do not fit, say) are left to the headroom sizing."""
    if known.is_empty():
        return pl.DataFrame(schema={"run_id": pl.String, "thr_now": pl.Float64})
    cols = [f"{r}_{x}_util" for r in ROLE_COUNTS for x in UTIL_RESOURCES[r]]
    return (
        predict_frame(known, hw)
        .select(
            "run_id", pl.col("throughput_eps").alias("thr_now"), *[pl.col(c).alias(f"now_{c}") for c in cols]
        )
        .filter(pl.col("thr_now") > 0)
    )


AT = ("binding_resource", "binding_p95_util", "p95_after_util", "thr")  # what a count is reported with


def _size_with_model(
    known: pl.DataFrame,
    pairs: pl.DataFrame,
    now: pl.DataFrame,
    hw: HardwareCatalog,
    models: dict[str, ModelSpec],
    target: float,
) -> pl.DataFrame:
    """Bisection over counts for every pair at once (one model evaluation per step): the feasible counts
    are those at and above the smallest one, as the model's throughput rises and its load per server falls
    with more servers. The first step tries one server fewer, which settles the pairs where every server
    counts (trainers, mostly). What each pair is reported with comes from the steps themselves: the last
    feasible count evaluated (the right-sized one) and the last infeasible one (one fewer: why not)."""
    if pairs.is_empty():
        return pairs
    p = pairs.join(now, on="run_id").sort("run_id", "role").with_row_index("_pair")
    held = p["n_servers"].to_numpy().astype(np.int64)
    lo, hi = np.zeros_like(held), held.copy()
    at = {k: v.to_numpy().astype(object) for k, v in _at_held(p, target).to_dict().items()}
    why = np.full(held.size, "one_server", dtype=object)

    def step(idx: np.ndarray, counts: np.ndarray) -> np.ndarray:
        chk = _check(known, p[idx], counts, hw, target)
        ok = chk["ok"].to_numpy()
        for k in AT:
            at[k][idx[ok]] = chk[k].to_numpy()[ok]
        why[idx[~ok]] = np.select(
            [~chk["fits"].to_numpy(), ~chk["thr_ok"].to_numpy()], ["capacity", "throughput"], "utilisation"
        )[~ok]
        return ok

    active = np.flatnonzero(held > 1)
    mid = held[active] - 1
    while active.size:
        ok = step(active, mid)
        hi[active] = np.where(ok, mid, hi[active])
        lo[active] = np.where(ok, lo[active], mid)
        active = np.flatnonzero(hi - lo > 1)
        mid = (lo[active] + hi[active]) // 2
    rec = p.select("run_id", "role").join(
        _recommender_counts(known, hw, models), on=["run_id", "role"], how="left", maintain_order="left"
    )
    final = np.minimum(held, np.maximum(hi, rec["recommender_servers"].fill_null(0).to_numpy()))
    floored = np.flatnonzero(final > hi)
    if floored.size:  # the recommender's count binds: reported at that count
        step(floored, final[floored])
        why[floored] = "recommender"
    return pl.DataFrame(
        {
            "run_id": p["run_id"],
            "role": p["role"],
            "n_servers": p["n_servers"],
            "basis": np.full(final.size, "workload_model"),
            "right_sized_servers": final,
            "recommender_servers": rec["recommender_servers"],
            "binding_resource": pl.Series(at["binding_resource"].tolist(), dtype=pl.String),
            "binding_p95_util": pl.Series(at["binding_p95_util"].tolist(), dtype=pl.Float64),
            "p95_after_util": pl.Series(at["p95_after_util"].tolist(), dtype=pl.Float64),
            "limited_by": why.astype(str),
            "throughput_risk": (1 - pl.Series(at["thr"].tolist(), dtype=pl.Float64) / p["thr_now"]).clip(
                0, 1
            ),
        }
    )


def _at_held(p: pl.DataFrame, target: float) -> pl.DataFrame:
    """Every pair at the count it holds, where no model evaluation is needed: each resource's load per
    server as now (p95 as observed) and the throughput as now."""
    after = {
        r: _per_role(
            lambda role, r=r: pl.when((pl.col("role") == role) & (pl.col(f"now_{role}_{r}_util") > 0)).then(
                pl.col(f"p95_{r}")
            ),
            r,
        ).alias(f"after_{r}")
        for r in resources()
    }
    limits = [pl.max_horizontal(pl.lit(target), pl.col(f"p95_{r}")).alias(f"limit_{r}") for r in resources()]
    return _with_binding(p.with_columns(*after.values(), *limits), "after", "limit").select(
        *AT[:-1], pl.col("thr_now").alias("thr")
    )


def _check(
    known: pl.DataFrame, pairs: pl.DataFrame, counts: np.ndarray, hw: HardwareCatalog, target: float
) -> pl.DataFrame:
    """The workload model with each pair's role at ``counts`` (other tiers as the run has them): in the
    pairs' order, whether that count is feasible (and why not) and the binding resource there."""
    carried = pairs.select("_pair", "run_id", "role", "thr_now", cs.starts_with("p95_", "now_"))
    trial = carried.with_columns(pl.Series("_n", counts, pl.Int32)).join(known, on="run_id")
    trial = trial.with_columns(
        pl.when(pl.col("role") == role).then(pl.col("_n")).otherwise(pl.col(col)).cast(pl.Int32).alias(col)
        for role, col in ROLE_COUNTS.items()
    )
    pred = predict_frame(trial, hw).sort("_pair")
    after, limit = {}, {}
    for res in resources():
        load = _per_role(
            lambda role, res=res: pl.when(
                (pl.col("role") == role) & (pl.col(f"now_{role}_{res}_util") > 0)
            ).then(pl.col(f"{role}_{res}_util") / pl.col(f"now_{role}_{res}_util")),
            res,
        )
        after[res] = (pl.col(f"p95_{res}") * load).alias(f"after_{res}")
        limit[res] = pl.max_horizontal(pl.lit(target), pl.col(f"p95_{res}")).alias(f"limit_{res}")
    thr = pl.col("throughput_eps")
    checked = pred.select(
        "_pair",
        thr.alias("thr"),
        pl.col("fits").fill_null(False),
        (thr.is_not_null() & (thr >= SATURATION * pl.col("thr_now"))).alias("thr_ok"),
        *after.values(),
        *limit.values(),
        *[pl.col(f"p95_{r}") for r in resources()],
    )
    util_ok = pl.all_horizontal(
        pl.col(f"after_{r}").is_null() | (pl.col(f"after_{r}") <= pl.col(f"limit_{r}") + SLACK)
        for r in resources()
    )
    checked = checked.with_columns(util_ok.alias("util_ok")).with_columns(
        (pl.col("thr_ok") & pl.col("util_ok")).alias("ok")
    )
    return _with_binding(checked, "after", "limit")


def _per_role(expr, res: str) -> pl.Expr:
    """``expr(role)`` for the first role the workload model predicts ``res`` for; null for a resource it
    does not model (a contract resource such as tensor-core activity: no load to scale)."""
    parts = [expr(role) for role in ROLE_COUNTS if res in UTIL_RESOURCES[role]]
    return pl.coalesce(parts) if parts else pl.lit(None, pl.Float64)


def _with_binding(
    frame: pl.DataFrame, after: str, limit: str, also: dict[str, str] | None = None
) -> pl.DataFrame:
    """``frame`` with the resource whose scaled p95 is closest to its limit (the first such, in contract
    order), its p95 now and its scaled p95; ``also`` names more columns to take at that resource (output
    name -> column prefix). The choice is made in numpy: polars' list columns cost a tenth of a second per
    search step here."""
    names = resources()
    scores = frame.select(
        (pl.col(f"{after}_{r}") / pl.col(f"{limit}_{r}")).fill_null(-1.0).fill_nan(-1.0).alias(r)
        for r in names
    ).to_numpy()
    best = scores.argmax(axis=1)
    found = scores[np.arange(best.size), best] >= 0
    chosen = pl.Series("_binding", np.where(found, best, -1))

    def pick(values: list[pl.Expr]) -> pl.Expr:
        return pl.coalesce([pl.when(pl.col("_binding") == i).then(v) for i, v in enumerate(values)])

    return (
        frame.with_columns(chosen)
        .with_columns(
            pick([pl.lit(r, pl.String) for r in names]).alias("binding_resource"),
            pick([pl.col(f"p95_{r}") for r in names]).alias("binding_p95_util"),
            pick([pl.col(f"{after}_{r}") for r in names]).alias("p95_after_util"),
            *[
                pick([pl.col(f"{prefix}_{r}") for r in names]).alias(out)
                for out, prefix in (also or {}).items()
            ],
        )
        .drop("_binding")
    )


def _recommender_counts(
    known: pl.DataFrame, hw: HardwareCatalog, models: dict[str, ModelSpec]
) -> pl.DataFrame:
    """Per run and role, the recommender's binding-constraint count for the run's system: its model
    family's catalog workload (what `fleet recommend --model` sizes) on the run's platform, placement and
    trainers, or the run's own workload for a family the catalog does not hold. A run's count depends on
    that run alone, so days merge."""
    keys = ["model_name", "platform", "placement", "n_trainers"]
    tiers = list(ROLE_COUNTS.values())[1:]
    from_scratch = [pl.lit(0, pl.Int32).alias(c) for c in tiers]
    in_catalog = pl.col("model_name").is_in(list(models))
    rows = []
    for s in known.filter(in_catalog).select(keys).unique().iter_rows(named=True):  # a handful a day
        w = workload_of_model(models[s["model_name"]])
        batch = batch_on(w, s["platform"], hw.platforms[s["platform"]].gpus)
        rows.append(
            {k: w[k] for k in fields.workload_keys() if w.get(k) is not None} | s | {"batch_size": batch}
        )
    sized = []
    if rows:
        setups = size_servers(pl.DataFrame(rows, infer_schema_length=None).with_columns(from_scratch), hw)
        sized.append(
            known.filter(in_catalog)
            .select("run_id", *keys)
            .join(setups.select(*keys, *tiers), on=keys)
            .select("run_id", "platform", "placement", *tiers)
        )
    own = known.filter(~in_catalog)
    if own.height:
        sized.append(
            size_servers(own.with_columns(from_scratch), hw).select("run_id", "platform", "placement", *tiers)
        )
    if not sized:
        return pl.DataFrame(schema={"run_id": pl.String, "role": pl.String, "recommender_servers": pl.Int32})
    on_cpu = pl.col("platform").replace_strict(
        {k: v.gpus == 0 for k, v in hw.platforms.items()}, default=False
    )
    return (
        pl.concat(sized, how="vertical_relaxed")
        .select(
            "run_id",
            pl.when(pl.col("placement") == "remote_ps").then(pl.col("n_sparse_ps")).alias("sparse_ps"),
            pl.when(on_cpu).then(pl.col("n_dense_ps")).alias("dense_ps"),
            pl.col("n_readers").alias("reader"),
        )
        .unpivot(
            ["sparse_ps", "dense_ps", "reader"],
            index="run_id",
            variable_name="role",
            value_name="recommender_servers",
        )
        .drop_nulls()
        .with_columns(pl.col("recommender_servers").cast(pl.Int32))
    )


def _size_with_headroom(pairs: pl.DataFrame, target: float) -> pl.DataFrame:
    """Telemetry only: the smallest count at which the load of every resource that spreads over the servers,
    spread evenly (p95 x n / n'), stays at or under the target; n where one is already above it."""
    if pairs.is_empty():
        return pairs
    spreads = load_resources()
    n = pl.col("n_servers").cast(pl.Float64)
    needs = []
    for res in resources():
        roles = [r for r, rs in spreads.items() if res in rs]
        p95 = pl.when(pl.col("role").is_in(roles)).then(pl.col(f"p95_{res}"))
        needs.append(pl.when(p95 > target + SLACK).then(n).otherwise((n * p95 / target - SLACK).ceil()))
    sized = pairs.with_columns(
        pl.max_horizontal(needs).fill_null(n).clip(1, n).cast(pl.Int64).alias("right_sized_servers")
    )
    scale = n / pl.col("right_sized_servers")
    sized = sized.with_columns(
        *[
            pl.when(pl.col("role").is_in([r for r, rs in spreads.items() if res in rs]))
            .then(pl.col(f"p95_{res}") * scale)
            .alias(f"after_{res}")
            for res in resources()
        ],
        *[pl.max_horizontal(pl.lit(target), pl.col(f"p95_{r}")).alias(f"limit_{r}") for r in resources()],
    )
    sized = _with_binding(sized, "after", "limit", also={"_peak": "max"})
    peak = pl.col("_peak")  # the binding resource's busiest sample
    return sized.select(
        "run_id",
        "role",
        "n_servers",
        pl.lit("utilisation_headroom").alias("basis"),
        "right_sized_servers",
        "binding_resource",
        "binding_p95_util",
        "p95_after_util",
        pl.when(pl.col("right_sized_servers") == 1)
        .then(pl.lit("one_server"))
        .otherwise(pl.lit("utilisation"))
        .alias("limited_by"),
        # The busiest sample's demand at the new count beyond what a server can do.
        (1 - 1 / (peak * scale)).clip(0, 1).alias("throughput_risk"),
    )


def _recoverable_watts(hw: HardwareCatalog) -> pl.Expr:
    """Peak watts of the recoverable servers: trainers are the run's platform, the other roles the
    catalog's CPU servers (``remote_ps_platform``); null where the catalog has no peak watts."""
    peak = {p: float(v.peak_w) if v.peak_w is not None else None for p, v in hw.platforms.items()}
    platform = (
        pl.when(pl.col("role") == "trainer").then(pl.col("platform")).otherwise(pl.lit(hw.remote_ps_platform))
    )
    watts = platform.replace_strict(peak, default=None, return_dtype=pl.Float64)
    return (pl.col("servers_recoverable") * watts).alias("provisioned_w_recoverable")
