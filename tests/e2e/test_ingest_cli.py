"""`fleet ingest` on the bad-input corpus: every defect quarantined with its reason, every row reconciled."""

import json
from pathlib import Path

import duckdb
import pytest

from tests.support.cli import BIN, run

pytestmark = pytest.mark.usefixtures("fleet_cli")  # every test crosses the process boundary
CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def test_corpus_every_defect_named_and_every_row_reconciled(tmp_path):
    home = tmp_path / "home"
    p = run([str(BIN / "fleet"), "ingest", str(CORPUS / "landing"), "--home", str(home)])
    assert p.returncode == 0, p.stderr  # quarantining bad input is the job done, not a failure
    assert "ingested 1 day(s): 15 files, 1,044 rows in, 7 accepted, 1,037 quarantined" in p.stdout
    assert "quarantine entries file_truncated: 1" in p.stdout
    expected = {
        (f, int(r)): reason
        for f, rows in json.loads((CORPUS / "expected.json").read_text()).items()
        for r, reason in rows.items()
    }
    assert len(expected) >= 20  # distinct defects
    # every reason code is exercised; what git cannot hold (a symlink out of landing, a FIFO, a name that is
    # not UTF-8) is made by tests/unit/test_hostile_landing.py
    from pipelines.lib.contracts import contract

    assert set(expected.values()) == set(contract("quarantine").column("reason_code").enum) - {
        "file_outside_landing",
        "file_not_regular",
        "file_bad_name",
        "file_unstable",
    }
    con = duckdb.connect(str(home / "warehouse" / "fleet.duckdb"), read_only=True)
    try:
        got = {
            (f, r): reason
            for f, r, reason in con.execute(
                "SELECT source_file, row_number, reason_code FROM quarantine"
            ).fetchall()
        }
        messages = {
            (f, r): m
            for f, r, m in con.execute("SELECT source_file, row_number, message FROM quarantine").fetchall()
        }
        ledger = con.execute(
            "SELECT source_file, rows_in, rows_accepted, rows_quarantined, extra_columns FROM ingest_ledger"
        ).fetchall()
        extras = con.execute("SELECT fields FROM extra_fields").fetchall()
        runs = sorted(r[0] for r in con.execute("SELECT run_id FROM runs").fetchall())
    finally:
        con.close()
    assert got == expected
    assert all(len(m) > 20 for m in messages.values())  # a sentence a person can act on
    assert "line 1 is 1,0" in messages[("acme/2026-11-20/runs-huge.jsonl.gz", 0)]
    assert "1,000 are listed one by one" in messages[("acme/2026-11-20/utilisation_samples-noisy.csv", 1002)]
    assert "expands beyond the limits" in messages[("acme/2026-11-20/runs-bomb.jsonl.gz", 0)]
    assert (
        "identical to acme/2026-11-20/runs-a-first.jsonl"
        in messages[("acme/2026-11-20/runs-b-again.jsonl", 0)]
    )
    for source_file, rows_in, accepted, quarantined, _ in ledger:
        assert rows_in == accepted + quarantined, source_file
    assert {f: e for f, *_, e in ledger}["acme/2026-11-20/runs.jsonl"] == "colour,team"
    assert json.loads(extras[0][0]) == {"colour": "blue", "team": "ads"}
    assert runs == ["copy-1", "copy-2", "good-1", "good-2"]


def test_ingest_fails_loudly_only_when_it_cannot_do_its_job(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "lake").write_text("not a folder")  # the lake cannot be written
    p = run([str(BIN / "fleet"), "ingest", str(CORPUS / "landing"), "--home", str(home)])
    assert p.returncode == 1
    assert "fleet: cannot do the ingest" in p.stderr and "lake" in p.stderr
    missing = run([str(BIN / "fleet"), "ingest", str(tmp_path / "nowhere"), "--home", str(home)])
    assert missing.returncode == 2 and "does not exist" in missing.stderr
