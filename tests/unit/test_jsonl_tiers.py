"""JSON Lines tiers: a fast tier may only ever be faster, never different.

The precise (line by line) path is the oracle. Every file here is ingested with each tier forced to go
first (DuckDB, then pyarrow, each falling back to the precise path when it cannot vouch) and compared
with the precise path alone, byte for byte: ledger counts and extra columns, quarantine entries (file,
line, reason, field, message, raw record), accepted rows and extra fields.

Small files exercise the tiers' rules quickly; the differential fuzzer builds files larger than DuckDB's
sample, many batches and several pyarrow blocks long (16,000 lines at batches of 1,000 and a sample of
2,048; one gzipped 100,000-line file at the default limits) with hostile lines placed early and late, plus
random mixtures.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import json
import shutil

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.lib.ingest import ingest_day
from pipelines.lib.ingest.readers import jsonl
from pipelines.lib.paths import DataHome
from pipelines.lib.settings import DEFAULT_LIMITS
from tests.support.bigfiles import big_day
from tests.support.homes import DAY
from tests.support.hypo import examples

FORCED = {
    "duckdb": ("duckdb", "precise"),
    "pyarrow": ("pyarrow", "precise"),
    "default": jsonl.TIERS,
}
PRECISE = ("precise",)


def outcome(
    tmp_path, runs: bytes, name: str, data: bytes, hw, monkeypatch, tiers, sample=None, limits=DEFAULT_LIMITS
) -> dict:
    """What ingest leaves of ``data`` (a landing file named ``name``) beside ``runs`` with ``tiers``."""
    home = DataHome.resolve(tmp_path / "-".join(tiers))
    folder = home.landing / "producer" / DAY
    folder.mkdir(parents=True)
    (folder / "runs.jsonl").write_bytes(runs)
    (folder / name).write_bytes(data)
    with monkeypatch.context() as m:
        m.setattr(jsonl, "TIERS", tiers)
        if sample is not None:
            m.setattr(jsonl, "SAMPLE_RECORDS", sample)
        r = ingest_day(home, DAY, hw.platforms, limits=limits)
    mine = pl.col("source_file").str.ends_with(name)
    out = {
        "ledger": r.ingest_ledger.filter(mine)
        .select("rows_in", "rows_accepted", "rows_quarantined", "file_status", "extra_columns")
        .to_dicts(),
        "quarantine": r.quarantine.filter(mine)
        .select("row_number", "reason_code", "field", "message", "raw_record", "raw_record_cut")
        .to_dicts(),
        "accepted": r.utilisation_samples.drop("day").sort("run_id", "server_id", "ts"),
        "extras": r.extra_fields.filter(mine).select("row_number", "fields").sort("row_number").to_dicts(),
    }
    out["tier"] = r.ingest_ledger.filter(mine)["reader_tier"][0]
    r.discard()
    shutil.rmtree(home.root)  # only the answer is kept: a full run makes ~150 of these 20 MB homes
    return out


def assert_same(got: dict, want: dict, label: str) -> None:
    assert got["ledger"] == want["ledger"], label
    assert got["quarantine"] == want["quarantine"], label
    assert got["extras"] == want["extras"], label
    assert got["accepted"].equals(want["accepted"]), label


# ---------------------------------------------------------------- small files: the tiers' rules


@pytest.fixture
def small(small_day) -> tuple[bytes, list[dict]]:
    """The small day's runs file and 400 of its samples, GPU and CPU servers alternating."""
    runs = small_day.runs.with_columns(pl.col("start_ts", "end_ts").dt.to_string("%Y-%m-%dT%H:%M:%SZ"))
    s = small_day.samples.with_columns(pl.col("ts").dt.to_string("%Y-%m-%dT%H:%M:%SZ"))
    gpu = s.filter(pl.col("gpu_util").is_not_null()).head(200)
    cpu = s.filter(pl.col("gpu_util").is_null()).head(200)
    rows = (
        pl.concat([gpu.with_row_index("i"), cpu.with_row_index("i")]).sort("i", maintain_order=True).drop("i")
    )
    return runs.write_ndjson().encode(), [json.loads(line) for line in rows.write_ndjson().splitlines()]


def _lines(rows) -> bytes:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows).encode() + b"\n"


VARIANTS = {
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
    "only_nulls_then_a_key": lambda s: (
        [{**r, "gpu_util": None} for r in s[:60]] + [{**s[60], "firmware": "v2"}] + s[61:]
    ),
    "missing_key": lambda s: [{k: v for k, v in r.items() if k != "gpu_mem_util"} for r in s],
    "duplicate_key": lambda s: s[:5] + [json.dumps(s[5])[:-1] + ', "cpu_util": 0.9}'] + s[6:],
    "not_json_late": lambda s: s[:250] + ["{broken"] + s[250:],
    "array_line": lambda s: s[:10] + ["[1, 2]"] + s[10:],
    "text_mentions_true": lambda s: s[:20] + [{**s[20], "server_id": "a:true"}] + s[21:],
    "nan_literal": lambda s: s[:30] + [json.dumps(s[30]).replace(str(s[30]["cpu_util"]), "NaN", 1)] + s[31:],
    "escaped_text": lambda s: [{**s[0], "server_id": s[0]["server_id"] + "\u00e9\t"}] + s[1:],
    "extra_in_every_row": lambda s: [{**r, "host": f"h{i % 7}", "rack": i % 3} for i, r in enumerate(s)],
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_small_files_end_as_the_precise_path(variant, tmp_path, small, hw, monkeypatch):
    runs, samples = small
    data = _lines(VARIANTS[variant](samples))
    want = outcome(tmp_path, runs, "utilisation_samples-v.jsonl", data, hw, monkeypatch, PRECISE, sample=50)
    for label, tiers in FORCED.items():
        got = outcome(tmp_path, runs, "utilisation_samples-v.jsonl", data, hw, monkeypatch, tiers, sample=50)
        assert_same(got, want, f"{variant} / {label}")
    assert want["ledger"][0]["rows_in"] == data.count(b"\n")


def test_a_regular_file_is_read_by_the_duckdb_tier_alone(tmp_path, small, hw, monkeypatch):
    """BOM, CRLF, blank and whitespace lines, padded objects: the DuckDB tier vouches for it all."""
    runs, samples = small
    body = _lines(samples[:100] + ["", "   ", "  " + json.dumps(samples[100]) + "\t"] + samples[101:])
    data = b"\xef\xbb\xbf" + body.replace(b"\n", b"\r\n")
    got = outcome(
        tmp_path, runs, "utilisation_samples-r.jsonl", data, hw, monkeypatch, jsonl.TIERS, sample=50
    )
    want = outcome(tmp_path, runs, "utilisation_samples-r.jsonl", data, hw, monkeypatch, PRECISE, sample=50)
    assert_same(got, want, "regular")
    assert got["tier"] == "duckdb" and want["tier"] == "precise"
    assert got["quarantine"] == []


# ---------------------------------------------------------------- the differential fuzzer: large files

# The matrix of hostile kinds runs on files of N_LINES at SMALL (batches of 1,000 lines, a DuckDB sample
# of 2,048 records): a late fault lies past the sample, in the 15th batch and pyarrow's 3rd block, as it
# lay past the default sample and first block in 100,000 lines (and more batches are crossed). One big
# case, a gzipped file of BIG_LINES at the default limits, keeps the default sizes honest.
N_LINES, BIG_LINES = 16_000, 100_000
EARLY, LATE, BIG_LATE = 3, 14_000, 93_000
SMALL = dataclasses.replace(DEFAULT_LIMITS, batch_rows=1_000)
SMALL_SAMPLE = 2_048


@functools.cache
def big_base(n: int = N_LINES) -> tuple[bytes, tuple[bytes, ...]]:
    """A runs file with one run over the whole day and ``n`` samples of it (unique keys), as lines."""
    runs, frame = big_day(n)
    lines = tuple(line.encode() for line in frame.write_ndjson().splitlines())
    return (json.dumps(runs) + "\n").encode(), lines


def _edit(line: bytes, key: str, value: str) -> bytes:
    """``line`` with ``key``'s value replaced by the JSON text ``value``."""
    obj = json.loads(line)
    head = json.dumps({k: obj[k] for k in list(obj)[: list(obj).index(key)]})[:-1]
    rest = {k: obj[k] for k in list(obj)[list(obj).index(key) + 1 :]}
    tail = ("," + json.dumps(rest)[1:]) if rest else "}"
    return f'{head}{", " if head != "{" else ""}"{key}": {value}{tail}'.encode()


def _add(line: bytes, member: str) -> bytes:
    return line[:-1] + b", " + member.encode() + b"}"


# Each hostile kind replaces the line at a position with what it returns (lines after it shift).
HOSTILE = {
    "null_line": lambda ls, i: [b"null"],
    "two_objects_on_a_line": lambda ls, i: [ls[i] + ls[i + 1]],
    "two_objects_with_a_space": lambda ls, i: [ls[i] + b" " + ls[i + 1]],
    "bare_cr_between_objects": lambda ls, i: [ls[i] + b"\r" + ls[i + 1]],
    "object_split_over_two_lines": lambda ls, i: [ls[i][:40], ls[i][40:]],
    "object_split_at_a_comma": lambda ls, i: [ls[i][: ls[i].index(b",") + 1], ls[i][ls[i].index(b",") + 1 :]],
    "record_then_1mib_of_spaces": lambda ls, i: [ls[i] + b" " * (1 << 20)],
    "number_written_1.50": lambda ls, i: [_edit(ls[i], "cpu_util", "1.50")],
    "nan_literal": lambda ls, i: [_edit(ls[i], "cpu_util", "NaN")],
    "infinity_literal": lambda ls, i: [_edit(ls[i], "mem_cap_util", "-Infinity")],
    "number_1e400": lambda ls, i: [_edit(ls[i], "power_w", "1e400")],
    "extra_field_1.50": lambda ls, i: [_add(ls[i], '"zz": 1.50')],
    "extra_nested": lambda ls, i: [_add(ls[i], '"zz": {"a": [1.50, true, null], "b": "\\u00e9"}')],
    "empty_key": lambda ls, i: [_add(ls[i], '"": "x"')],
    "not_utf8_in_text": lambda ls, i: [ls[i].replace(b'"s', b'"\xff', 1)],
    "new_key": lambda ls, i: [_add(ls[i], '"firmware": "v2"')],
    "key_differs_in_case": lambda ls, i: [_add(ls[i], '"Server_id": "x"')],
    "duplicate_key_in_object": lambda ls, i: [_add(ls[i], '"cpu_util": 7')],
    "duplicate_key_first_bad": lambda ls, i: [ls[i].replace(b'"cpu_util"', b'"cpu_util": 7, "cpu_util"', 1)],
    "boolean_in_a_number": lambda ls, i: [_edit(ls[i], "net_bw_util", "true")],
    "broken_json": lambda ls, i: [ls[i][:-3]],
    "array_line": lambda ls, i: [b"[1, 2]"],
    "string_line": lambda ls, i: [b'"just text"'],
    "whitespace_lines": lambda ls, i: [b"   ", b"\t", ls[i]],
    "padded_object": lambda ls, i: [b"  " + ls[i] + b" \t"],
    "vertical_tab_before_object": lambda ls, i: [b"\x0b" + ls[i]],
    "bom_mid_file": lambda ls, i: [b"\xef\xbb\xbf" + ls[i]],
    "nul_escape": lambda ls, i: [ls[i].replace(b'"s', b'"\\u0000s', 1)],
    "lone_surrogate": lambda ls, i: [ls[i].replace(b'"s', b'"\\ud800s', 1)],
    "escaped_key": lambda ls, i: [ls[i].replace(b'"role"', b'"r\\u006fle"', 1)],
    "missing_required": lambda ls, i: [_edit(ls[i], "role", "null")],
    "unknown_role": lambda ls, i: [_edit(ls[i], "role", '"chef"')],
    "object_for_text": lambda ls, i: [_edit(ls[i], "role", '{"a": 1.50}')],
    "number_for_text": lambda ls, i: [_edit(ls[i], "server_id", "1.50")],
    "unknown_run": lambda ls, i: [_edit(ls[i], "run_id", '"r-none"')],
    "ts_outside_run": lambda ls, i: [_edit(ls[i], "ts", '"2026-11-21T00:00:03Z"')],
    "repeats_an_earlier_sample": lambda ls, i: [ls[1]],
    "integer_value": lambda ls, i: [_edit(ls[i], "power_w", "250")],
    "far_too_many_rejects": lambda ls, i: [_edit(x, "cpu_util", "1.50") for x in ls[i : i + 1500]],
}
# how many lines each kind consumes from the base
CONSUMES = {"two_objects_on_a_line": 2, "two_objects_with_a_space": 2, "bare_cr_between_objects": 2}
CONSUMES["far_too_many_rejects"] = 1500


def hostile_file(placements: list[tuple[str, int]], n: int = N_LINES) -> bytes:
    _, base = big_base(n)
    lines = list(base)
    for kind, at in sorted(placements, key=lambda p: -p[1]):  # from the end: positions stay valid
        lines[at : at + CONSUMES.get(kind, 1)] = HOSTILE[kind](base, at)
    return b"\n".join(lines) + b"\n"


@pytest.fixture  # no two tests share a file: per test, so they spread over the processes
def reference(tmp_path_factory, hw):
    """The precise path's outcome per file."""
    cache: dict = {}

    def get(placements, data, name, monkeypatch, n=N_LINES):
        key = (tuple(placements), name, n)
        if key not in cache:
            runs, _ = big_base(n)
            tmp = tmp_path_factory.mktemp("ref")
            cache[key] = outcome(tmp, runs, name, data, hw, monkeypatch, PRECISE, **_sized(n))
        return cache[key]

    return get


def _sized(n: int) -> dict:
    """The limits and DuckDB sample a file of ``n`` lines is read with: SMALL for the matrix's files."""
    return {} if n == BIG_LINES else {"sample": SMALL_SAMPLE, "limits": SMALL}


def _check(placements, tmp_path, hw, monkeypatch, reference, gz=False, tiers=FORCED, n=N_LINES):
    runs, _ = big_base(n)
    data = hostile_file(placements, n)
    name = "utilisation_samples.jsonl"
    if gz:
        data, name = gzip.compress(data, compresslevel=1), name + ".gz"
    want = reference(placements, data, name, monkeypatch, n)
    for label, forced in tiers.items():
        got = outcome(tmp_path / label, runs, name, data, hw, monkeypatch, forced, **_sized(n))
        assert_same(got, want, f"{placements} / {label}")
    return want


@pytest.mark.usefixtures("big_input")
@pytest.mark.parametrize("at", [EARLY, LATE], ids=["early", "late"])
@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_every_tier_answers_as_the_precise_path(kind, at, tmp_path, hw, monkeypatch, reference):
    want = _check([(kind, at)], tmp_path, hw, monkeypatch, reference)
    led = want["ledger"][0]
    assert led["rows_in"] == led["rows_accepted"] + led["rows_quarantined"]


@pytest.mark.usefixtures("big_input")
def test_a_gzipped_file_answers_as_the_precise_path(tmp_path, hw, monkeypatch, reference):
    want = _check(
        [("number_written_1.50", BIG_LATE), ("unknown_run", EARLY), ("repeats_an_earlier_sample", 50_000)],
        tmp_path,
        hw,
        monkeypatch,
        reference,
        gz=True,
        n=BIG_LINES,
    )
    raws = [q["raw_record"] for q in want["quarantine"]]
    assert any('"cpu_util": 1.50' in r for r in raws)  # the line as delivered, not re-serialised


@pytest.mark.usefixtures("big_input")
@settings(
    max_examples=examples(12),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    placements=st.lists(
        st.tuples(
            st.sampled_from(
                sorted(k for k in HOSTILE if k not in ("far_too_many_rejects", "record_then_1mib_of_spaces"))
            ),
            st.integers(min_value=2, max_value=N_LINES - 3),
        ),
        min_size=1,
        max_size=4,
        unique_by=lambda p: p[1] // 4,
    )
)
def test_random_mixtures_answer_as_the_precise_path(placements, tmp_path_factory, hw, monkeypatch, reference):
    _check(
        placements, tmp_path_factory.mktemp("mix"), hw, monkeypatch, reference, tiers={"default": jsonl.TIERS}
    )
