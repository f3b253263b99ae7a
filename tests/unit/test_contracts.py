"""Contracts load from schemas/, derive Arrow/Dagster schemas, and validate good and bad rows precisely."""

import datetime as dt
import math
import re

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from pipelines.defs.metadata import table_schema
from pipelines.lib.contracts import (
    ContractError,
    conformance_violations,
    contract,
    contracts,
    key_duplicates,
    load_contract,
)
from pipelines.lib.ingest import validation as validation_module
from pipelines.lib.ingest.validation import validate_rows
from tests.support.hypo import examples

VIEWS = [
    "runs",
    "utilisation_samples",
    "ingest_ledger",
    "quarantine",
    "run_role_stats",
    "util_distribution",
    "util_summary",
    "trainer_vs_ps",
    "server_count_hist",
    "hardware_fit",
    "recommendations",
]
PLATFORMS = {"hardware_catalog": frozenset({"cpu", "big_basin", "zion"})}


def test_every_analyst_table_has_a_contract():
    assert set(VIEWS) <= set(contracts())


@pytest.mark.parametrize("name", VIEWS)
def test_contract_derives_arrow_and_dagster_schemas(name):
    c = contract(name)
    schema = c.arrow_schema()
    assert schema.names == c.column_names
    assert all(f.nullable == col.nullable for f, col in zip(schema, c.columns, strict=False))
    ts = table_schema(name)
    assert [col.name for col in ts.columns] == c.column_names
    assert all(col.description for col in ts.columns)


def test_units_and_bounds_of_utilisation_are_declared():
    c = contract("utilisation_samples")
    for name in ("cpu_util", "mem_cap_util", "mem_bw_util", "net_bw_util", "gpu_util", "gpu_mem_util"):
        col = c.column(name)
        assert (col.min, col.max, col.unit) == (0, 1, "fraction")
    assert c.column("ts").arrow_type == pa.timestamp("us", tz="UTC")
    assert c.primary_key == ("run_id", "server_id", "ts")


def _sample(**over):
    row = {
        "run_id": "r1",
        "server_id": "s1",
        "role": "trainer",
        "ts": "2026-11-20T00:05:00Z",
        "cpu_util": "0.5",
        "mem_cap_util": "0.2",
        "mem_bw_util": "0.1",
        "net_bw_util": "0.3",
        "gpu_util": None,
        "gpu_mem_util": None,
        "power_w": "250",
    }
    row.update(over)
    return row


def _validate(rows, table="utilisation_samples"):
    frame = pl.DataFrame(rows, schema=dict.fromkeys(rows[0], pl.String)).with_row_index(
        "_row_number", offset=1
    )
    return validate_rows(frame, contract(table), carry=("_row_number",), allowed=PLATFORMS)


def test_good_rows_are_typed_and_accepted():
    v = _validate(
        [_sample(), _sample(ts="2026-11-20 00:10:00", cpu_util="1"), _sample(ts="2026-11-20T01:15:00+01:00")]
    )
    assert v.rejected.height == 0
    assert v.accepted.schema["ts"] == pl.Datetime("us", "UTC")
    assert v.accepted["ts"].dt.to_string("%H:%M").to_list() == ["00:05", "00:10", "00:15"]
    assert v.accepted["gpu_util"].null_count() == 3


@pytest.mark.parametrize(
    "override, reason, field, words",
    [
        ({"run_id": None}, "missing_required", "run_id", "missing"),
        ({"run_id": "  "}, "missing_required", "run_id", "missing"),
        ({"cpu_util": "high"}, "wrong_type", "cpu_util", "'cpu_util' = high is not a value of type float64"),
        ({"ts": "yesterday"}, "wrong_type", "ts", "ISO-8601"),
        ({"cpu_util": "1.7"}, "out_of_bounds", "cpu_util", "above the maximum 1 fraction"),
        ({"net_bw_util": "-0.1"}, "out_of_bounds", "net_bw_util", "below the minimum 0"),
        ({"power_w": "-5"}, "out_of_bounds", "power_w", "below the minimum 0 W"),
        ({"mem_bw_util": "NaN"}, "not_finite", "mem_bw_util", "not a finite number"),
        ({"gpu_util": "inf"}, "not_finite", "gpu_util", "not a finite number"),
        ({"role": "worker"}, "unknown_value", "role", "not one of trainer, sparse_ps, dense_ps, reader"),
    ],
)
def test_bad_sample_rows_are_rejected_with_reason_field_and_message(override, reason, field, words):
    v = _validate([_sample(), _sample(**override)])
    assert v.accepted.height == 1
    bad = v.rejected.row(0, named=True)
    assert (bad["_row_number"], bad["reason_code"], bad["field"]) == (2, reason, field)
    assert words in bad["message"]
    assert '"run_id"' in bad["raw_record"]  # original content kept


@pytest.mark.parametrize(
    "server_id, blank",
    [
        ("", True),
        (" ", True),
        ("\t \u00a0", True),  # led by ASCII whitespace, then only (Unicode) whitespace
        ("  s2", False),
        ("\x01s2", False),  # a control byte sorts below "!" but is not whitespace
        ("\u00a0", False),  # not led by ASCII whitespace
        ("s2", False),
    ],
)
def test_blank_text_is_missing_whatever_else_the_batch_holds(server_id, blank):
    """Blank text is found whether or not the batch's smallest value could be blank (the cheap pre-test)."""
    for rows in ([_sample(server_id=server_id)], [_sample(server_id="zz"), _sample(server_id=server_id)]):
        v = _validate(rows)
        missing = v.rejected.filter(pl.col("reason_code") == "missing_required")
        assert missing["field"].to_list() == (["server_id"] if blank else [])
        assert v.accepted.height + v.rejected.height == len(rows)


def _run(**over):
    row = {
        "run_id": "r1",
        "start_ts": "2026-11-20T01:00:00Z",
        "end_ts": "2026-11-20T02:00:00Z",
        "status": "succeeded",
        "model_name": "M1prod",
        "n_dense_features": "512",
        "n_sparse_features": "40",
        "n_tables": "40",
        "embedding_dim": "64",
        "embedding_gb": "40.5",
        "mean_lookups_per_table": "20",
        "bottom_mlp": "512-256-64",
        "top_mlp": "512-1",
        "interaction": "dot",
        "batch_size": "512",
        "platform": "cpu",
        "placement": "remote_ps",
        "n_trainers": "16",
        "n_sparse_ps": "4",
        "n_dense_ps": "2",
        "n_readers": "16",
        "throughput_eps": "1000",
        "power_w": "9000",
        "normalized_entropy": None,
    }
    row.update(over)
    return row


@pytest.mark.parametrize(
    "override, reason, field",
    [
        ({"platform": "tpu_pod"}, "unknown_value", "platform"),
        ({"placement": "ssd"}, "unknown_value", "placement"),
        ({"n_trainers": "2.5"}, "wrong_type", "n_trainers"),
        ({"n_sparse_ps": "-1"}, "out_of_bounds", "n_sparse_ps"),
        ({"bottom_mlp": "512x256"}, "bad_pattern", "bottom_mlp"),
        ({"end_ts": "2026-11-20T00:30:00Z"}, "out_of_bounds", "end_ts"),
        ({"n_readers": "3e12"}, "wrong_type", "n_readers"),
    ],
)
def test_bad_run_rows_are_rejected(override, reason, field):
    v = _validate([_run(), _run(**override)], table="runs")
    assert v.accepted.height == 1 and v.rejected.height == 1
    assert (v.rejected["reason_code"][0], v.rejected["field"][0]) == (reason, field)


def test_unknown_platform_message_lists_the_known_ones():
    v = _validate([_run(platform="tpu_pod")], table="runs")
    assert "known: big_basin, cpu, zion" in v.rejected["message"][0]


def test_integral_floats_are_accepted_for_integer_columns():
    v = _validate([_run(n_trainers="16.0")], table="runs")
    assert v.accepted["n_trainers"].to_list() == [16]


def test_conformance_catches_broken_partitions():
    c = contract("server_count_hist")
    frame = pl.DataFrame(
        {
            "day": ["2026-01-01", "2026-01-01"],
            "source": ["s", "s"],
            "platform": ["cpu", "cpu"],
            "model_name": ["M1prod", "M1prod"],
            "ps_based": [True, True],
            "role": ["trainer", "trainer"],
            "n_servers": [16, 16],
            "n_runs": [3, 0],
        }
    ).with_columns(pl.col("day").str.to_date(), pl.col("n_servers").cast(pl.Int32))
    problems = conformance_violations(frame, c)
    assert any("n_runs: values below 1" in p for p in problems)
    assert key_duplicates(frame, c) == 2
    assert conformance_violations(frame.head(1), c) == [] and key_duplicates(frame.head(1), c) == 0


def test_timestamps_are_bounded_by_the_contract():
    """A run in year 0 or 10000 was accepted and later crashed `fleet recommend --run` (OverflowError)."""
    c = contract("runs")
    n = 5
    frame = pl.DataFrame(
        {
            "__fleet_row": list(range(1, n + 1)),
            "run_id": [f"r{i}" for i in range(n)],
            "status": ["succeeded"] * n,
            "start_ts": ["0000-01-01T00:00:00Z", "2026-01-01T00:00:00Z", "1999-12-31T23:59:59Z"]
            + ["2026-01-01T00:00:00Z"] * 2,
            "end_ts": ["2026-01-02T00:00:00Z", "10000-01-01T00:00:00Z", "2026-01-01T00:00:00Z"]
            + ["2100-01-01T00:00:00Z", "2026-01-02T00:00:00Z"],
            "n_trainers": ["1"] * n,
            "n_sparse_ps": ["0"] * n,
            "n_dense_ps": ["0"] * n,
            "n_readers": ["0"] * n,
            "platform": ["cpu"] * n,
        }
    )
    v = validate_rows(frame, c, carry=("__fleet_row",))
    assert v.rejected.select("__fleet_row", "reason_code", "field").rows() == [
        (1, "out_of_bounds", "start_ts"),
        (2, "wrong_type", "end_ts"),
        (3, "out_of_bounds", "start_ts"),
        (4, "out_of_bounds", "end_ts"),
    ]
    assert "below the minimum 2000-01-01T00:00:00Z" in v.rejected["message"][0]
    assert v.accepted["run_id"].to_list() == ["r4"]
    assert c.column("start_ts").max == dt.datetime(2099, 12, 31, 23, 59, 59, tzinfo=dt.UTC)
    assert contract("utilisation_samples").column("ts").min == dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


def test_every_column_description_says_what_its_values_are():
    """The analyst catalog's column comments come from these: none may just restate the name
    ("resource: Resource.", "statistic: What one count is.")."""
    terse = [
        f"{c.name}.{col.name}: {col.description!r}"
        for c in contracts().values()
        for col in c.columns
        if len(re.findall(r"[A-Za-z0-9_]+", col.description)) < 4
    ]
    assert not terse, terse


@pytest.mark.parametrize(
    ("described", "error"),
    [
        ({"a": "The first.", "b": "The second."}, None),
        ({"a": "The first."}, "no description for ['b']"),
        ({"a": "The first.", "b": "The second.", "c": "Not a value."}, "['c'] not in enum"),
        ({"a": "The first.", "b": " "}, "['b'] need a sentence"),
        (["a", "b"], "must map each value"),
    ],
)
def test_enum_descriptions_describe_every_value_and_nothing_else(tmp_path, described, error):
    column = {"name": "kind", "type": "string", "nullable": False, "enum": ["a", "b"]}
    spec = {"name": "t", "layer": "raw", "description": "A table.", "primary_key": ["kind"]}
    spec["columns"] = [{**column, "description": "Which kind.", "enum_descriptions": described}]
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(spec))
    if error is None:
        col = load_contract(tmp_path / "t.yaml").column("kind")
        assert col.described_values == described
        return
    with pytest.raises(ContractError, match=re.escape(error)):
        load_contract(tmp_path / "t.yaml")


_ODD_NUMBERS = st.sampled_from([0.0, 0.5, 1.0, -0.1, 1.7, -5.0, 2e3, math.nan, math.inf, -math.inf, None])


@settings(max_examples=examples(150), deadline=None)
@given(data=st.data(), typed=st.booleans(), n=st.integers(1, 12))
def test_column_statistics_never_change_a_verdict(monkeypatch_module, data, typed, n):
    # The per-batch statistics skip the row-by-row test of columns they prove clean: on batches mixing
    # clean and broken values (NaN, infinities, bounds, blanks, text), the answer is the row-by-row one's.
    c = contract("utilisation_samples")
    numeric = [x.name for x in c.landing_columns if x.type == "float64"]
    frame = {
        "run_id": data.draw(st.lists(st.sampled_from(["r1", "r2", " ", None]), min_size=n, max_size=n)),
        "server_id": ["s"] * n,
        "role": data.draw(st.lists(st.sampled_from(["trainer", "reader", "worker"]), min_size=n, max_size=n)),
        "ts": data.draw(
            st.lists(
                st.sampled_from(
                    ["2026-11-20T00:05:00Z", "1999-12-31T23:00:00Z", "2100-01-01T00:00:00Z", "x"]
                ),
                min_size=n,
                max_size=n,
            )
        ),
        "_row_number": list(range(n)),
    }
    for name in numeric:
        values = data.draw(st.lists(_ODD_NUMBERS, min_size=n, max_size=n))
        frame[name] = values if typed else [None if v is None else str(v) for v in values]
    batch = pl.DataFrame(frame, schema_overrides=dict.fromkeys(numeric, pl.Float64 if typed else pl.String))
    fast = validate_rows(batch, c, carry=("_row_number",), allowed=PLATFORMS)
    monkeypatch_module.setattr(validation_module, "_clean_columns", lambda both, cols: set())
    try:
        slow = validate_rows(batch, c, carry=("_row_number",), allowed=PLATFORMS)
    finally:
        monkeypatch_module.undo()
    assert fast.accepted.equals(slow.accepted, null_equal=True)
    assert fast.rejected.equals(slow.rejected, null_equal=True)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.mark.parametrize(
    "late",
    [
        {"cpu_util": math.nan},
        {"mem_cap_util": math.inf},
        {"net_bw_util": 1.0000001},
        {"power_w": -1e-9},
        {"cpu_util": None},
        {"ts": "2100-01-01T00:00:00Z"},
        {"ts": " "},
        {"server_id": "  "},
    ],
)
def test_column_statistics_on_a_large_batch_with_one_late_fault(late):
    # 250,000 clean rows and one hostile value in the last row: the statistics must not vouch for its
    # column, and the verdicts are the row-by-row ones.
    c = contract("utilisation_samples")
    n = 250_000
    rng = np.random.default_rng(5)
    cols = {
        "_row_number": np.arange(n),
        "run_id": ["r1"] * n,
        "server_id": [f"s{i % 97}" for i in range(n)],
        "role": ["trainer"] * n,
        "ts": ["2026-11-20T00:05:00Z"] * n,
        **{x.name: rng.uniform(0, 1, n) for x in c.landing_columns if x.type == "float64"},
    }
    batch = pl.DataFrame(cols)
    key, value = next(iter(late.items()))
    batch = batch.with_columns(
        pl.when(pl.col("_row_number") == n - 1)
        .then(pl.lit(value, batch.schema[key]))
        .otherwise(pl.col(key))
        .alias(key)
    )
    fast = validate_rows(batch, c, carry=("_row_number",), allowed=PLATFORMS)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(validation_module, "_clean_columns", lambda both, cols: set())
        slow = validate_rows(batch, c, carry=("_row_number",), allowed=PLATFORMS)
    assert fast.rejected["_row_number"].to_list() == [n - 1]
    assert fast.accepted.equals(slow.accepted, null_equal=True)
    assert fast.rejected.equals(slow.rejected, null_equal=True)


# ------------------------------------------------------------ a row's verdict does not depend on its batch

_TEXT = {
    "string": ["a", "x y", "", " ", "  lead", "é", None],
    "timestamp": [
        "2026-01-01T00:00:00Z",
        " 2026-01-01T00:00:05Z ",
        "2026-01-01 00:00:10",
        "2026-01-01T00:00:00+02:00",
        "1999-01-01T00:00:00Z",
        "bad",
        "",
        " ",
        None,
    ],
    "float64": ["0.5", " 0.25 ", "1", "-0.1", "1e400", "nan", "inf", "abc", "\t0.3\n", "", "  ", None],
    "int32": ["1", " 2 ", "1.0", "1.5", "-1", "99999999999", "3e2", "x", "", None],
    "bool": ["true", " Yes ", "0", "no", "maybe", "", None],
    "date": ["2026-01-01", " 2026-01-02 ", "2026-13-01", "", None],
}
_TYPED_FLOATS = [0.5, 1.0, -0.1, 2.0, math.nan, math.inf, None]


@st.composite
def _batches(draw, table: str) -> pl.DataFrame:
    """A batch of landing rows as text (CSV, JSON strings), some float columns typed (Parquet, JSON
    numbers), some columns absent: every value either clean or hostile in the ways the parsers handle."""
    c = contract(table)
    n = draw(st.integers(1, 8))
    cols = []
    for col in c.landing_columns:
        if draw(st.integers(0, 5)) == 0:
            continue  # absent from the file
        if col.type == "float64" and draw(st.booleans()):
            values = draw(st.lists(st.sampled_from(_TYPED_FLOATS), min_size=n, max_size=n))
            cols.append(pl.Series(col.name, values, dtype=pl.Float64))
            continue
        pool = list(col.enum) + ["other", "", None] if col.enum else _TEXT[col.type]
        values = draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n))
        cols.append(pl.Series(col.name, values, dtype=pl.String))
    return pl.DataFrame({"__row": pl.int_range(n, eager=True)}).with_columns(cols)


@pytest.mark.parametrize("table", ["utilisation_samples", "runs"])
@settings(max_examples=examples(60), deadline=None)
@given(data=st.data())
def test_a_rows_verdict_does_not_depend_on_its_batch(table, data):
    """Validation works on whole columns (one select for every column's first parse, fallbacks only where
    it failed, shortcuts for columns that parsed or are absent): each row of a batch must get exactly the
    verdict it gets alone."""
    c = contract(table)
    frame = data.draw(_batches(table))
    whole = validate_rows(frame, c, carry=("__row",))
    alone = [validate_rows(frame.slice(i, 1), c, carry=("__row",)) for i in range(frame.height)]
    assert whole.accepted.height + whole.rejected.height == frame.height
    for part, got in (("accepted", whole.accepted), ("rejected", whole.rejected)):
        want = pl.concat([getattr(v, part) for v in alone], how="vertical_relaxed")
        assert_frame_equal(got.sort("__row"), want.sort("__row"), check_dtypes=False)
