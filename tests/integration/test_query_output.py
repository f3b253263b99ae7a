"""`fleet query` prints plain aligned tables (no dataframe debug output) and JSON with numbers as numbers."""

import json

from pipelines.cli import main


def _query(capsys, catalog_path, *args):
    assert main(["query", *args, "--home", str(catalog_path.parent.parent)]) == 0
    return capsys.readouterr().out


def test_query_prints_an_aligned_table(catalog, capsys):
    out = _query(capsys, catalog, "server_counts_ps_based")
    lines = out.splitlines()
    assert lines[0].split() == [
        "role",
        "runs",
        "median_servers",
        "mean_servers",
        "max_servers",
        "share_exactly_1",
        "modal_servers",
        "share_modal",
    ]
    assert set(lines[1].replace(" ", "")) == {"-"} and lines[-1] == "(2 rows)"
    assert {ln.split()[0] for ln in lines[2:4]} == {"sparse_ps", "trainer"}
    assert all(len(ln.split()) == 8 for ln in lines[2:4])
    for debug in ("shape:", "decimal[", "i64", "f64", "str", "┌", "│"):
        assert debug not in out
    # Numbers are right-aligned under their header.
    runs_end = lines[0].index("runs") + len("runs")
    assert all(ln[runs_end - 1] != " " for ln in lines[2:4])


def test_query_json_has_numbers_as_numbers(catalog, capsys):
    rows = json.loads(_query(capsys, catalog, "server_counts_ps_based", "--json"))
    assert len(rows) == 2
    assert rows[0]["runs"] == rows[1]["runs"] > 0  # CPU-cluster runs, counted per role
    for r in rows:
        assert isinstance(r["runs"], int)
        assert isinstance(r["max_servers"], int) and isinstance(r["mean_servers"], float)


def test_empty_result_still_names_its_columns(catalog, capsys):
    out = _query(capsys, catalog, "files_not_reconciling")
    assert out.splitlines()[-1] == "(0 rows)" and len(out.splitlines()) == 3
