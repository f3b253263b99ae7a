"""Asset metadata previews: a markdown table of the first rows, built without touching the process
environment (pl.Config writes POLARS_FMT_* variables, which native threads may read at the same moment)."""

import os

import polars as pl

from pipelines.defs.metadata import preview


def test_preview_is_a_markdown_table_and_leaves_the_environment_alone(monkeypatch):
    writes = []
    monkeypatch.setattr(os, "putenv", lambda *a: writes.append(a))
    monkeypatch.setattr(os, "unsetenv", lambda *a: writes.append(a))
    frame = pl.DataFrame(
        {
            "run_id": ["r|1", None, "r3"],
            "p95_util": [0.123456, None, 1.0],
            "n": [1, 2, 3],
            "ids": [["a"], [], None],
        }
    )
    text = preview(frame, rows=2).value
    assert text.splitlines() == [
        "| run_id | p95_util | n | ids |",
        "|---|---|---|---|",
        "| r\\|1 | 0.1235 | 1 | a |",
        "|  |  | 2 |  |",
    ]
    assert writes == []
