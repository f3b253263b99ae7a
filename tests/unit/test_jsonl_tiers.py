"""JSON Lines tiers: the DuckDB tier reads what it can vouch for, and every file ends exactly as the precise
(line by line) path would leave it: the same rows accepted, the same rows quarantined for the same reason,
the same extra fields."""

import json

import polars as pl
import pyarrow as pa
import pytest

from pipelines.lib import readers
from pipelines.lib.contracts import contract
from pipelines.lib.ingest import ingest_day
from pipelines.lib.paths import DataHome
from synthetic_fleet.writers import write_day
from tests.conftest import DAY

SAMPLE = 50  # records the DuckDB tier detects columns from, in these tests


@pytest.fixture
def samples(small_day) -> list[dict]:
    """400 samples, GPU and CPU servers alternating: every column has values from the first records."""
    s = small_day.samples.with_columns(pl.col("ts").dt.to_string("%Y-%m-%dT%H:%M:%SZ"))
    gpu, cpu = (
        s.filter(pl.col("gpu_util").is_not_null()).head(200),
        s.filter(pl.col("gpu_util").is_null()).head(200),
    )
    rows = (
        pl.concat([gpu.with_row_index("i"), cpu.with_row_index("i")]).sort("i", maintain_order=True).drop("i")
    )
    return [json.loads(line) for line in rows.write_ndjson().splitlines()]


def _lines(rows) -> bytes:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows).encode() + b"\n"


def _outcome(tmp_path, name, small_day, hw, data: bytes, monkeypatch, precise: bool) -> dict:
    home = DataHome.resolve(tmp_path / ("precise" if precise else "tiers"))
    home.root.mkdir(parents=True)
    write_day(small_day, home.landing, source="synthetic", fmt="jsonl")
    target = home.landing / "producer" / DAY / name
    target.parent.mkdir(parents=True)
    target.write_bytes(data)
    with monkeypatch.context() as m:
        m.setattr(readers, "SAMPLE_RECORDS", SAMPLE)
        if precise:

            def unvouched(*_a, **_k):
                raise readers._Unvouched("forced")
                yield

            def invalid(*_a, **_k):
                raise pa.ArrowInvalid("forced")
                yield

            m.setattr(readers, "_jsonl_duckdb", unvouched)
            m.setattr(readers, "_jsonl_pyarrow", invalid)
        r = ingest_day(home, DAY, hw.platforms)
    ledger = r.ingest_ledger.filter(pl.col("source") == "producer")
    return {
        "ledger": ledger.select(
            "rows_in", "rows_accepted", "rows_quarantined", "file_status", "extra_columns"
        ).to_dicts(),
        "quarantine": sorted(
            r.quarantine.select("source_file", "row_number", "reason_code", "field").iter_rows()
        ),
        "accepted": r.utilisation_samples.drop("day").sort("run_id", "server_id", "ts").to_dicts(),
        "extras": sorted(r.extra_fields.select("row_number", "fields").iter_rows()),
    }


def _tiers_used(path, monkeypatch) -> list[str]:
    with monkeypatch.context() as m:
        m.setattr(readers, "SAMPLE_RECORDS", SAMPLE)
        return [
            b.why
            for b in readers.read_jsonl(
                path, contract("utilisation_samples"), "x", False, readers.FileInfo(), path.parent
            )
            if isinstance(b, readers.FallBack)
        ]


def test_a_regular_file_is_read_by_the_duckdb_tier_alone(tmp_path, samples, monkeypatch):
    path = tmp_path / "utilisation_samples.jsonl"
    path.write_bytes(
        b"\xef\xbb\xbf" + _lines(samples[:100] + ["", "   "] + samples[100:]).replace(b"\n", b"\r\n")
    )
    assert _tiers_used(path, monkeypatch) == []


VARIANTS = {
    # what the DuckDB tier must hand on, or read the same as the precise path
    "boolean_in_a_number": lambda s: s[:200] + [{**s[200], "cpu_util": True}] + s[201:],
    "key_after_the_sample": lambda s: s[:300] + [{**s[300], "firmware": "v2"}] + s[301:],
    "number_key_in_the_sample": lambda s: [{**s[0], "firmware": 7}] + s[1:],
    "text_key_in_the_sample": lambda s: (
        [{**s[0], "firmware": "v1"}] + s[1:100] + [{**s[100], "firmware": 2}] + s[101:]
    ),
    "key_differs_in_case": lambda s: [{**s[0], "Run_ID": "x"}] + s[1:],
    "integers_in_the_sample": lambda s: [{**r, "power_w": round(r["power_w"])} for r in s[:60]] + s[60:],
    "numbers_as_text": lambda s: [{**r, "cpu_util": str(r["cpu_util"])} for r in s],
    "text_as_number": lambda s: s[:80] + [{**s[80], "role": 5}] + s[81:],
    "only_nulls_in_the_sample": lambda s: (
        [{**r, "gpu_util": None} for r in s[:60]] + [{**s[60], "gpu_util": 0.5}] + s[61:]
    ),
    "only_nulls_in_the_sample_then_a_key": lambda s: (
        [{**r, "gpu_util": None} for r in s[:60]] + [{**s[60], "firmware": "v2"}] + s[61:]
    ),
    "missing_key": lambda s: [{k: v for k, v in r.items() if k != "gpu_mem_util"} for r in s],
    "duplicate_key": lambda s: s[:5] + [json.dumps(s[5])[:-1] + ', "cpu_util": 0.9}'] + s[6:],
    "not_json_late": lambda s: s[:250] + ["{broken"] + s[250:],
    "array_line": lambda s: s[:10] + ["[1, 2]"] + s[10:],
    "text_mentions_true": lambda s: s[:20] + [{**s[20], "server_id": "a:true"}] + s[21:],
    "nan_literal": lambda s: s[:30] + [json.dumps(s[30]).replace(str(s[30]["cpu_util"]), "NaN", 1)] + s[31:],
    "escaped_text": lambda s: [{**s[0], "server_id": s[0]["server_id"] + "\u00e9\t"}] + s[1:],
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_tier_ends_as_the_precise_path(variant, tmp_path, samples, small_day, hw, monkeypatch):
    data = _lines(VARIANTS[variant](samples))
    name = "utilisation_samples-variant.jsonl"
    tiers = _outcome(tmp_path, name, small_day, hw, data, monkeypatch, precise=False)
    precise = _outcome(tmp_path, name, small_day, hw, data, monkeypatch, precise=True)
    assert tiers == precise
    assert tiers["ledger"][0]["rows_in"] == data.count(b"\n")


def test_a_late_key_or_a_boolean_hands_the_file_on(tmp_path, samples, monkeypatch):
    path = tmp_path / "utilisation_samples.jsonl"
    for rows in (VARIANTS["key_after_the_sample"](samples), VARIANTS["boolean_in_a_number"](samples)):
        path.write_bytes(_lines(rows))
        assert len(_tiers_used(path, monkeypatch)) >= 1
