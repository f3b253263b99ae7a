"""Every canned analyst query has a description, binds its parameters and runs against the real catalog."""

import polars as pl
import pytest

from pipelines.lib.contracts import contract
from pipelines.lib.query import queries


def test_every_canned_query_is_described():
    found = queries.canned()
    assert len(found) >= 8
    for q in found.values():
        assert len(q.description) > 30 and q.description[0].isupper()


@pytest.mark.parametrize("name", sorted(queries.canned()))
def test_canned_query_runs(catalog, name):
    result = queries.run(catalog, name)
    assert result.width > 0
    if name == "files_not_reconciling":
        assert result.height == 0
    if name == "recommended_options":
        assert result.height >= 2 and result["explanation"].str.starts_with("Recommended.").all()
    if name in (
        "waste_by_model_platform",
        "waste_top_runs",
        "stragglers_and_hot_shards",
        "ps_oversized_share",
    ):
        assert result.height > 0


def test_query_parameters_are_bound_and_checked(catalog):
    assert (
        queries.run(catalog, "server_counts_ps_based", {"source": "nowhere'; DROP VIEW runs; --"}).height == 0
    )
    assert queries.run(catalog, "server_counts_ps_based", {"source": "synthetic"}).height == 2
    with pytest.raises(KeyError, match="takes"):
        queries.run(catalog, "quarantine_by_reason", {"day": "x"})
    q = queries.canned()["utilisation_quantiles_for_days"]
    assert q.constants["n_bins"] == contract("util_distribution").parameters["n_bins"]
    with pytest.raises(KeyError, match="n_bins is a property of the stored data"):
        queries.run(catalog, "utilisation_quantiles_for_days", {"n_bins": "10"})


def test_waste_queries_answer_over_a_day_range(catalog):
    top = queries.run(catalog, "waste_top_runs", {"top": 1})
    assert top["run_id"].n_unique() == 1 and top["servers_recoverable"].sum() > 0
    assert (
        queries.run(
            catalog, "waste_by_model_platform", {"first_day": "2000-01-01", "last_day": "2000-01-02"}
        ).height
        == 0
    )
    share = queries.run(catalog, "ps_oversized_share").row(0, named=True)
    assert (
        share["source"] == "synthetic" and share["ps_judged"] == share["ps_held"] > share["ps_oversized"] > 0
    )


def test_canned_query_counts_are_int64_not_int128(catalog):
    """DuckDB sums BIGINT into HUGEINT, which polars, pandas and Arrow clients receive as int128 or
    decimal(38, 0): the queries cast their sums back."""
    for name in queries.canned():
        schema = queries.run(catalog, name).schema
        wide = {c: t for c, t in schema.items() if isinstance(t, pl.Decimal) or t == pl.Int128}
        assert not wide, (name, wide)
    assert queries.run(catalog, "waste_by_model_platform").schema["servers_recoverable"] == pl.Int64
    quantiles = queries.run(catalog, "utilisation_quantiles_for_days")
    assert quantiles.schema["samples"] == pl.Int64
    assert (quantiles["p75_util"] <= quantiles["p90_util"]).all()
    assert (quantiles["p90_util"] <= quantiles["p95_util"]).all()
