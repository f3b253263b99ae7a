"""The performance page's tables say what a benchmark record holds, and describe each case from the suite."""

from __future__ import annotations

import json

from benchmarks import tables


def _row(case: str, ok: bool = True) -> dict:
    return {
        "case": case,
        "product_s": 4.2,
        "anchor_s": 2.1,
        "ratio": 2.0,
        "target": 2.0 if case.startswith("ingest") else None,
        "ok": ok,
        "product_rss_mb": 1019.4,
        "anchor_rss_mb": None,
        "note": "a | b",
    }


def test_every_case_the_suite_runs_is_described():
    described = tables.case_descriptions()
    for case in (
        "synth",
        "ingest-csv",
        "night-10M",
        "night-1M",
        "memory-jsonl",
        "split-4",
        "partials-2-by-time",
        "merge-8-days",
        "quantiles-16",
        "families",
        "workers",
        "prometheus",
        "fixed",
        "backfill",
    ):
        assert [title for pattern, title, _ in described if pattern.match(case)], case
    assert all("``" not in text for _, _, text in described)


def test_a_record_becomes_one_row_per_case_with_its_verdict(tmp_path):
    record = {
        "when": "2026-12-05T17:30:00+00:00",
        "samples": 10_000_000,
        "cpus": 2,
        "commit": "abc1234",
        "repeats": 3,
        "rows": [_row("ingest-csv"), _row("night-10M", ok=False)],
    }
    (tmp_path / "bench-2026-12-05.json").write_text(json.dumps(record))
    (tmp_path / "bench-2026-12-01.json").write_text(
        json.dumps({**record, "when": "2026-12-01T00:00:00+00:00"})
    )
    records = tables.records(tmp_path)
    assert [r["when"][:10] for r in records] == ["2026-12-05", "2026-12-01"]
    text = tables.markdown(records[0])
    assert "commit `abc1234`" in text and "10,000,000 samples" in text and "3 interleaved repeats" in text
    assert "| ingest-csv | 4.20 | 2.10 | 2.00 | 2.00 | yes | 1,019 | — | a \\| b |" in text
    assert "| night-10M |" in text and "**no**" in text
    assert "- `ingest-parquet|csv|jsonl`:" in text and "- `night`:" in text and "- `synth`" not in text
