"""Hostile files cannot take the machine's memory: `fleet ingest` of each runs in its own process under an
address-space cap (a runaway allocation fails there instead of swapping the machine) and its peak RSS
stays within 1 GiB, while every row is still accounted for."""

from __future__ import annotations

import gzip
import json
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.lib.paths import PROJECT_ROOT
from tests.support.homes import DAY

pytestmark = pytest.mark.usefixtures("fleet_cli")  # every test crosses the process boundary
PEAK_RSS_LIMIT_MB = 1024
ADDRESS_SPACE_CAP = 6 << 30  # the process's threads and allocators reserve ~3-4 GB of address space
CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "landing"

CHILD = textwrap.dedent(
    """
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))
    from pipelines.cli import main
    rc = main(sys.argv[1:])
    hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
    print(f"peak_rss_kb={{hwm}}", file=sys.stderr)
    sys.exit(rc)
    """
)


def _parquet(path: Path, value: str, rows: int) -> None:
    """A tiny Parquet file: one text value, dictionary-encoded, repeated ``rows`` times."""
    dictionary = pa.array([value])
    table = pa.table({"run_id": pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), dictionary)})
    pq.write_table(table, path, compression="zstd")


def _hostile(folder: Path, kind: str) -> str | None:
    """Write one hostile landing file; returns the reason its entries carry (None: every row accepted)."""
    if kind == "33mb_of_empty_objects":
        (folder / "utilisation_samples-objects.jsonl").write_bytes(b"{}\n" * 11_000_000)
        return "missing_required"
    if kind == "16kb_gzip_of_empty_objects":  # just under the 16 MiB floor of the expansion limits
        raw = b"{}\n" * ((16 << 20) // 3 - 1)
        (folder / "utilisation_samples-bomb.jsonl.gz").write_bytes(gzip.compress(raw, 9))
        return "missing_required"
    if kind == "1kb_parquet_of_a_10mib_value":
        _parquet(folder / "runs-10mib.parquet", "x" * (10 << 20), 1000)
        return "file_oversized_line"
    if kind == "1kb_parquet_expanding_to_90gb":
        _parquet(folder / "runs-90gb.parquet", "y" * (900 << 10), 100_000)
        return "file_decompression_limit"
    if kind == "400_rejected_lines_of_1mib":
        line = json.dumps({"run_id": "r" * (1000 << 10), "status": "nope"})
        (folder / "runs-wide.jsonl").write_text((line + "\n") * 400)
        return "unknown_value"
    if kind == "2m_malformed_csv_records":
        (folder / "utilisation_samples-bad.csv").write_bytes(
            b"run_id,server_id,role,ts,cpu_util\n" + b"a,b\n" * 2_000_000
        )
        return "bad_csv_row"
    if kind == "2m_malformed_metric_lines":  # an OpenMetrics export of nothing but broken samples
        (folder / "scrape.prom").write_bytes(b'x{a="1" 2 1795132800000\n' * 2_000_000)
        return "bad_metric_line"
    if kind == "2m_samples_of_distinct_series":  # no series repeats: nothing to judge once per series
        (folder / "scrape.prom").write_bytes(
            b"".join(b'x{i="%d"} 1 1795132800000\n' % i for i in range(2_000_000))
        )
        return None
    raise AssertionError(kind)


def _ingest(src: Path, home: Path) -> tuple[subprocess.CompletedProcess, int]:
    p = subprocess.run(
        [sys.executable, "-c", CHILD.format(cap=ADDRESS_SPACE_CAP), "ingest", str(src), "--home", str(home)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    peak = [int(x.split("=")[1]) for x in p.stderr.split() if x.startswith("peak_rss_kb=")]
    return p, (peak[0] >> 10) if peak else -1


KINDS = [
    "33mb_of_empty_objects",
    "16kb_gzip_of_empty_objects",
    "1kb_parquet_of_a_10mib_value",
    "1kb_parquet_expanding_to_90gb",
    "400_rejected_lines_of_1mib",
    "2m_malformed_csv_records",
    "2m_malformed_metric_lines",
    "2m_samples_of_distinct_series",
]


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_file_is_ingested_in_bounded_memory(kind, tmp_path):
    import duckdb

    folder = tmp_path / "src" / "evil" / DAY
    folder.mkdir(parents=True)
    reason = _hostile(folder, kind)
    p, peak_mb = _ingest(tmp_path / "src", tmp_path / "home")
    assert p.returncode == 0, p.stderr[-2000:]
    assert 0 < peak_mb <= PEAK_RSS_LIMIT_MB, f"{kind}: peak RSS {peak_mb} MB"
    con = duckdb.connect(str(tmp_path / "home" / "warehouse" / "fleet.duckdb"), read_only=True)
    try:
        reasons = dict(con.sql("SELECT reason_code, count(*) FROM quarantine GROUP BY ALL").fetchall())
        ((rows_in, accepted, quarantined),) = con.sql(
            "SELECT sum(rows_in), sum(rows_accepted), sum(rows_quarantined) FROM ingest_ledger"
        ).fetchall()
        cut = con.execute("SELECT count(*) FROM quarantine WHERE raw_record_cut").fetchone()[0]
        longest = con.execute("SELECT coalesce(max(strlen(raw_record)), 0) FROM quarantine").fetchone()[0]
    finally:
        con.close()
    assert reason in reasons if reason else not reasons
    assert rows_in == accepted + quarantined
    assert sum(n for r, n in reasons.items() if r != "rejects_capped") <= 1000  # listed one by one, at most
    assert longest <= 64 << 10
    if kind == "400_rejected_lines_of_1mib":
        assert cut == 400 and rows_in == 400


def test_the_corpus_is_ingested_in_bounded_memory(tmp_path):
    p, peak_mb = _ingest(CORPUS, tmp_path / "home")
    assert p.returncode == 0, p.stderr[-2000:]
    assert 0 < peak_mb <= PEAK_RSS_LIMIT_MB, f"corpus: peak RSS {peak_mb} MB"


def test_the_cap_is_a_real_limit():
    """The cap above stops an allocation beyond it (so a runaway ingest would fail, not swap)."""
    code = CHILD.format(cap=ADDRESS_SPACE_CAP).split("from pipelines")[0] + "bytearray(8 << 30)\n"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "MemoryError" in p.stderr
    assert resource.getrlimit(resource.RLIMIT_AS)[0] != ADDRESS_SPACE_CAP  # the cap applies to the child only
