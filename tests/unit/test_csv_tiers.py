"""CSV line numbering: every tier answers as Python's csv module (the reference numbering) would.

pyarrow reads the values in every tier; the tiers differ in how records are mapped to the line they
start on: the non-empty lines (files without quotes), a vectorised RFC 4180 pass, or Python's csv module;
the first tier also reads numbers as numbers (``typed``), which must give the same values and verdicts.
Files with hostile records early and late (16,000 rows at batches of 1,000 and 1 MiB blocks for every
kind; 100,000-400,000 rows at the default sizes for the cases about pyarrow's blocks) are ingested with
each tier forced first and compared byte for byte; a malformed record is rejected alone (``bad_csv_row``)
at its own line.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import shutil

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.lib.ingest import ingest_day
from pipelines.lib.ingest.readers import csv as csv_reader
from pipelines.lib.ingest.readers import csv_records
from pipelines.lib.paths import DataHome
from pipelines.lib.settings import DEFAULT_LIMITS
from tests.support.bigfiles import big_day
from tests.support.homes import DAY
from tests.support.hypo import examples

N_ROWS = 100_000
EARLY, LATE = 3, 93_000
# The matrix of hostile kinds runs on MATRIX_ROWS at batches of 1,000 rows and 1 MiB parse blocks: a late
# record lies in the 15th batch and the 2nd block, as it lay in the 2nd 8 MiB block of 100,000 rows.
MATRIX_ROWS, MATRIX_LATE = 16_000, 14_000
SMALL = dataclasses.replace(DEFAULT_LIMITS, batch_rows=1_000)
REFERENCE = ("python",)
FORCED = {
    "typed": csv_reader.TIERS,
    "lines": ("lines", "rfc4180", "python"),
    "rfc4180": ("rfc4180", "python"),
}


@functools.cache
def base(n: int = N_ROWS) -> tuple[bytes, bytes, tuple[bytes, ...]]:
    run, frame = big_day(n, seed=11)
    text = frame.write_csv()
    header, *rows = text.encode().split(b"\n")[:-1]
    return (json.dumps(run) + "\n").encode(), header, tuple(rows)


def _field(row: bytes, i: int, value: bytes) -> bytes:
    cells = row.split(b",")
    cells[i] = value
    return b",".join(cells)


HOSTILE = {
    "blank_line": lambda rs, i: [b"", rs[i]],
    "whitespace_line": lambda rs, i: [b"   ", rs[i]],
    "crlf_line_end": lambda rs, i: [rs[i] + b"\r"],
    "lone_cr_line_end": lambda rs, i: [rs[i] + b"\r" + rs[i + 1]],
    "quoted_line_break": lambda rs, i: [_field(rs[i], 2, b'"train\ner"')],
    "quoted_crlf": lambda rs, i: [_field(rs[i], 2, b'"train\r\ner"')],
    "quoted_comma": lambda rs, i: [_field(rs[i], 1, b'"s,1"')],
    "escaped_quote": lambda rs, i: [_field(rs[i], 1, b'"s""1"')],
    "quote_inside_a_field": lambda rs, i: [_field(rs[i], 1, b's"1')],
    "text_after_a_closing_quote": lambda rs, i: [_field(rs[i], 1, b'"s"1')],
    "too_few_fields": lambda rs, i: [b",".join(rs[i].split(b",")[:4])],
    "too_many_fields": lambda rs, i: [rs[i] + b",extra"],
    "empty_quoted_number": lambda rs, i: [_field(rs[i], 4, b'""')],
    "out_of_bounds": lambda rs, i: [_field(rs[i], 4, b"1.50")],
    "not_a_number": lambda rs, i: [_field(rs[i], 5, b"high")],
    "unknown_run": lambda rs, i: [_field(rs[i], 0, b"r-none")],
    "repeats_an_earlier_row": lambda rs, i: [rs[1]],
    "many_malformed": lambda rs, i: [b"a,b" for _ in range(1500)],
    "quoted_break_then_malformed": lambda rs, i: [_field(rs[i], 2, b'"a\n\nb"'), b"x,y"],
    # numbers the typed tier reads itself: the same value as the text parse, or it reads on as text
    "padded_number": lambda rs, i: [_field(rs[i], 4, b" \t0.5 ")],
    "signed_number": lambda rs, i: [_field(rs[i], 5, b"+.5")],
    "negative_zero": lambda rs, i: [_field(rs[i], 7, b"-0")],
    "long_number": lambda rs, i: [_field(rs[i], 6, b"0." + b"0" * 300 + b"5")],
    "nan_with_payload": lambda rs, i: [_field(rs[i], 8, b"nan(1)")],
    "number_out_of_range": lambda rs, i: [_field(rs[i], 8, b"1e400")],
    "hex_number": lambda rs, i: [_field(rs[i], 4, b"0x1p-2")],
    "number_not_utf8": lambda rs, i: [_field(rs[i], 5, b"0.\xff5")],
    "blank_required_number": lambda rs, i: [_field(rs[i], 4, b"")],
    "whitespace_optional_number": lambda rs, i: [_field(rs[i], 6, b"  ")],
    "text_not_utf8": lambda rs, i: [_field(rs[i], 1, b"s\xff1")],
    "long_row": lambda rs, i: [_field(rs[i], 1, b"s" * (700 << 10))],
}
CONSUMES = {"lone_cr_line_end": 2, "many_malformed": 1500}


def hostile_file(kind: str, at: int, n: int = N_ROWS) -> bytes:
    _, header, rows = base(n)
    lines = list(rows)
    lines[at : at + CONSUMES.get(kind, 1)] = HOSTILE[kind](rows, at)
    return header + b"\n" + b"\n".join(lines) + b"\n"


def outcome(
    tmp_path,
    data: bytes,
    hw,
    monkeypatch,
    tiers,
    name="utilisation_samples.csv",
    runs: dict | None = None,
    limits=DEFAULT_LIMITS,
) -> dict:
    runs = base()[0] if runs is None else (json.dumps(runs) + "\n").encode()
    home = DataHome.resolve(tmp_path / "-".join(tiers))
    folder = home.landing / "producer" / DAY
    folder.mkdir(parents=True)
    (folder / "runs.jsonl").write_bytes(runs)
    (folder / name).write_bytes(data)
    with monkeypatch.context() as m:
        m.setattr(csv_reader, "TIERS", tiers)
        r = ingest_day(home, DAY, hw.platforms, limits=limits)
    mine = pl.col("source_file").str.contains(".csv", literal=True)
    out = {
        "ledger": r.ingest_ledger.filter(mine)
        .select("rows_in", "rows_accepted", "rows_quarantined", "file_status")
        .to_dicts(),
        "quarantine": r.quarantine.filter(mine)
        .select("row_number", "reason_code", "field", "message", "raw_record")
        .to_dicts(),
        "accepted": r.utilisation_samples.drop("day").sort("run_id", "server_id", "ts"),
        "tier": r.ingest_ledger.filter(mine)["reader_tier"][0],
    }
    r.discard()
    shutil.rmtree(home.root)  # only the answer is kept: a full run makes ~150 of these 20 MB homes
    return out


@pytest.fixture  # no two tests share a file: per test, so they spread over the processes
def reference(tmp_path_factory, hw):
    cache: dict = {}

    def get(key, data, monkeypatch, **sized):
        if key not in cache:
            cache[key] = outcome(tmp_path_factory.mktemp("ref"), data, hw, monkeypatch, REFERENCE, **sized)
        return cache[key]

    return get


def every_tier_as(want: dict, data: bytes, tmp_path, hw, monkeypatch, what: str, **sized) -> None:
    """Each tier forced first gives the reference's ledger, quarantine and accepted rows."""
    for label, tiers in FORCED.items():
        got = outcome(tmp_path / label, data, hw, monkeypatch, tiers, **sized)
        for part in ("ledger", "quarantine"):
            assert got[part] == want[part], f"{what} / {label}: {part}"
        assert got["accepted"].equals(want["accepted"]), f"{what} / {label}"


@pytest.mark.usefixtures("big_input")
@pytest.mark.parametrize("at", [EARLY, MATRIX_LATE], ids=["early", "late"])
@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_every_tier_numbers_lines_as_the_reference(kind, at, tmp_path, hw, monkeypatch, reference):
    monkeypatch.setattr(csv_reader, "CSV_BLOCK_BYTES", 1 << 20)
    data = hostile_file(kind, at, MATRIX_ROWS)  # the same one run as every other file here
    want = reference((kind, at), data, monkeypatch, limits=SMALL)
    every_tier_as(want, data, tmp_path, hw, monkeypatch, f"{kind} at {at}", limits=SMALL)
    led = want["ledger"][0]
    assert led["rows_in"] == led["rows_accepted"] + led["rows_quarantined"]


# With 1 MiB blocks the 10 MB file is ten of them: pyarrow parses ahead of the batch being numbered and the
# typed tier reads on as text from mid-file, past several blocks
SMALL_BLOCKS = (
    "number_not_utf8",
    "text_not_utf8",
    "nan_with_payload",
    "not_a_number",
    "out_of_bounds",
    "too_few_fields",
    "many_malformed",
    "long_row",
)


@pytest.mark.usefixtures("big_input")
@pytest.mark.parametrize("at", [EARLY, 50_000, LATE], ids=["early", "middle", "late"])
@pytest.mark.parametrize("kind", SMALL_BLOCKS)
def test_every_tier_answers_as_the_reference_across_small_blocks(kind, at, tmp_path, hw, monkeypatch):
    monkeypatch.setattr(csv_reader, "CSV_BLOCK_BYTES", 1 << 20)
    data = hostile_file(kind, at)
    want = outcome(tmp_path / "ref", data, hw, monkeypatch, REFERENCE)
    every_tier_as(want, data, tmp_path, hw, monkeypatch, f"{kind} at {at}")


@pytest.mark.usefixtures("big_input")
def test_a_malformed_record_blocks_after_the_batch_being_read_is_rejected_alone(tmp_path, hw, monkeypatch):
    """pyarrow parses blocks ahead of the batch it hands out and reports their malformed records early:
    they wait for their place in the numbering (on 54ac153 every tier quarantined the whole file)."""
    run, frame = big_day(400_000, seed=3)
    header, *rows = frame.write_csv().encode().split(b"\n")[:-1]
    rows[300_000] = b"a,b"
    data = header + b"\n" + b"\n".join(rows) + b"\n"
    for tiers in (REFERENCE, ("lines", "rfc4180", "python"), csv_reader.TIERS):
        got = outcome(tmp_path / tiers[0], data, hw, monkeypatch, tiers, runs=run)
        assert got["ledger"][0]["rows_accepted"] == 399_999, tiers
        assert [(q["row_number"], q["reason_code"]) for q in got["quarantine"]] == [(300_002, "bad_csv_row")]


def test_rows_are_numbered_by_the_line_their_record_starts_on(tmp_path, hw, monkeypatch):
    """A blank line, a quoted line break and a malformed record: each reject at its own source line."""
    _, header, rows = base()
    body = [rows[0], b"", _field(rows[1], 2, b'"train\ner"'), b"x,y", _field(rows[2], 4, b"1.50"), rows[3]]
    data = header + b"\n" + b"\n".join(body) + b"\n"
    got = outcome(tmp_path, data, hw, monkeypatch, csv_reader.TIERS)
    assert [(q["row_number"], q["reason_code"]) for q in got["quarantine"]] == [
        (4, "unknown_value"),  # the record that starts on line 4 spans lines 4-5
        (6, "bad_csv_row"),
        (7, "out_of_bounds"),
    ]
    assert got["quarantine"][1]["raw_record"] == "x,y"
    assert got["ledger"][0]["rows_in"] == 5 and got["tier"] == "rfc4180"


def test_a_file_without_quotes_is_numbered_by_its_lines(tmp_path, hw, monkeypatch):
    _, header, rows = base()
    data = header + b"\r\n" + b"\r\n".join([*rows[:10], b"", _field(rows[10], 4, b"2")]) + b"\r\n"
    got = outcome(tmp_path, data, hw, monkeypatch, csv_reader.TIERS)
    assert got["tier"] == "typed"  # the lines numbering, numbers typed
    assert [(q["row_number"], q["reason_code"]) for q in got["quarantine"]] == [(13, "out_of_bounds")]
    raw = json.loads(got["quarantine"][0]["raw_record"])  # from its line, read back without its CRLF
    assert raw == dict(zip(header.decode().split(","), rows[10].decode().split(","), strict=True)) | {
        "cpu_util": "2"
    }


def test_a_row_the_typed_tier_rejects_quotes_its_value_as_written(tmp_path, hw, monkeypatch):
    """Numbers typed, one rejected value late in a big file: the file stays on the typed tier, and the
    reject, judged again from its line, quotes the value as written (1.50, not the float's 1.5)."""
    got = outcome(tmp_path, hostile_file("out_of_bounds", LATE), hw, monkeypatch, csv_reader.TIERS)
    assert got["tier"] == "typed"
    (q,) = got["quarantine"]
    assert q["message"] == "'cpu_util' = 1.50 is above the maximum 1 fraction"
    assert json.loads(q["raw_record"])["cpu_util"] == "1.50"
    assert got["ledger"][0]["rows_accepted"] == N_ROWS - 1


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_a_value_pyarrow_cannot_read_as_a_number_turns_the_rest_of_the_file_to_text(
    tmp_path, hw, monkeypatch, gz
):
    """Late in the file (past pyarrow's first 8 MiB block), the rows before it stay the typed tier's and
    the rest is read as text from the first record not read yet; in the first block, the lines tier reads
    the file. Either way the answer is the reference's."""
    import gzip

    monkeypatch.setattr(csv_reader, "CSV_BLOCK_BYTES", 1 << 20)  # several blocks in a 10 MB file
    for at, tier in ((LATE, "typed"), (EARLY, "lines")):
        data = hostile_file("not_a_number", at)
        data = gzip.compress(data, 1) if gz else data
        name = "utilisation_samples.csv.gz" if gz else "utilisation_samples.csv"
        got = outcome(tmp_path / f"{at}", data, hw, monkeypatch, csv_reader.TIERS, name=name)
        want = outcome(tmp_path / f"ref{at}", data, hw, monkeypatch, REFERENCE, name=name)
        assert got["tier"] == tier
        for part in ("ledger", "quarantine"):
            assert got[part] == want[part], (at, part)
        assert got["accepted"].equals(want["accepted"])
        (q,) = got["quarantine"]
        assert q["message"] == "'mem_cap_util' = high is not a value of type float64"


_NUMBER_TEXT = st.one_of(
    st.floats(allow_nan=False).map(repr),
    st.floats(allow_nan=False).map(lambda x: f"{x:.{len(repr(x))}e}"),
    st.from_regex(r"\A[ \t]?[+-]?[0-9]{0,25}\.?[0-9]{0,25}([eE][+-]?[0-9]{1,4})?[ \t]?\Z"),
    st.text(alphabet=" \t0123456789.eE+-_xXpPnaifNIAF()\u00a0\u2003\u0661", max_size=24),
)


@settings(max_examples=examples(500), deadline=None)
@given(text=_NUMBER_TEXT)
def test_a_number_pyarrow_reads_is_the_number_the_text_parse_gives(text):
    """What the typed tier rests on: every finite value pyarrow's CSV reader gives for a field is, bit for
    bit, the text path's parse of that field (a non-finite one is a reject, which gives the tier up)."""
    import io
    import struct

    import pyarrow as pa
    import pyarrow.csv as pacsv

    from pipelines.lib.contracts import contract
    from pipelines.lib.ingest.validation import _parse_text

    col = next(x for x in contract("utilisation_samples").landing_columns if x.name == "power_w")
    try:
        table = pacsv.read_csv(
            io.BytesIO(b"x\n" + text.encode() + b"\n"),
            parse_options=pacsv.ParseOptions(newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(
                column_types={"x": pa.float64()}, null_values=[""], strings_can_be_null=True
            ),
        )
    except pa.ArrowInvalid:
        return  # the typed tier gives up: the text tiers read the file
    if table.num_rows == 0:
        return  # a blank line: no record in either tier
    typed = table.column("x")[0].as_py()
    parsed = _parse_text(col, pl.Series("power_w", [text]))[0]
    if typed is None:
        assert parsed is None  # blank: null in both
    elif math.isfinite(typed):
        assert parsed is not None and struct.pack("<d", parsed) == struct.pack("<d", typed), text


@settings(max_examples=examples(300), deadline=None)
@given(
    lines=st.lists(st.sampled_from([b"", b"a,b", b"1,2", b"  ", b"x" * 9]), min_size=1, max_size=40),
    ends=st.lists(st.sampled_from([b"\n", b"\r\n", b"\r"]), min_size=40, max_size=40),
    last=st.booleans(),
    scan=st.sampled_from([3, 7, 16, 1 << 20]),
)
def test_the_line_numbering_pass_is_exact_across_its_parts(lines, ends, last, scan):
    """The quote-free numbering (the non-empty lines after the header, a CRLF's CR not counted) against a
    line-by-line reference, on files cut into parts of a few bytes; a lone CR is refused, never misread."""
    import io

    data = b"".join(line + end for line, end in zip(lines, ends, strict=False))
    if not last:  # no line end after the last line
        data = data[: len(data) - len(ends[len(lines) - 1])]
    lone_cr = any(b == 13 and data[i + 1 : i + 2] != b"\n" for i, b in enumerate(data))
    if lone_cr:
        with pytest.raises(csv_records.Irregular), pytest.MonkeyPatch.context() as m:
            m.setattr(csv_records, "SCAN_BYTES", scan)
            list(csv_records.line_records(io.BytesIO(data), 2))
        return
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()  # the last line's end, not an empty line
    want = [i for i, text in enumerate(parts, start=1) if i > 1 and text.removesuffix(b"\r")]
    with pytest.MonkeyPatch.context() as m:
        m.setattr(csv_records, "SCAN_BYTES", scan)
        got = [int(x) for lines_, _ in csv_records.line_records(io.BytesIO(data), 2) for x in lines_]
    assert got == want
