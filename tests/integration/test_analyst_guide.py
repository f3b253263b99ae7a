"""The analyst's first step works: every SQL and Python block of docs/analyst-guide.md runs against a catalog
the pipeline built (Python on the DuckDB 2 API, SQL through `fleet sql`, the shell the product suggests), and
`fleet sql` behaves as a read-only shell."""

import io
import re
from pathlib import Path

import duckdb
import polars as pl
import pytest

from pipelines.cli import main
from pipelines.lib.paths import PROJECT_ROOT
from pipelines.lib.query import sqlshell
from pipelines.lib.storage import lake

GUIDE = (PROJECT_ROOT / "docs" / "analyst-guide.md").read_text()
SQL = re.findall(r"```sql\n(.*?)```", GUIDE, re.S)
PYTHON = re.findall(r"```python\n(.*?)```", GUIDE, re.S)


def test_the_guide_has_three_questions_in_sql_and_polars():
    assert len(re.findall(r"^## \d\. ", GUIDE, re.M)) == 3
    assert len(SQL) == 3 and len(PYTHON) == 4  # the connection, then one per question


@pytest.mark.parametrize("i", range(3))
def test_each_sql_answer_runs_in_fleet_sql(materialized_home, capsys, i):
    home, *_ = materialized_home
    assert main(["sql", "--home", str(home.root), "-c", SQL[i]]) == 0
    out = capsys.readouterr().out
    assert re.search(r"\((\d+) rows?\)$", out.strip()) and not out.strip().endswith("(0 rows)")


def test_the_python_answers_run_on_the_duckdb_2_api(materialized_home):
    home, *_ = materialized_home
    scope: dict = {}
    answers = []
    for block in PYTHON:
        exec(block.replace("data/warehouse/fleet.duckdb", str(home.catalog_path)), scope)
        if "answer" in scope:
            answers.append(scope.pop("answer"))
    assert len(answers) == 3
    assert all(isinstance(a, pl.DataFrame) and a.height for a in answers)
    # The paper's Fig. 5 finding, on the synthetic fleet, for every model with several CPU runs in this small
    # day (one run's means are one draw of its servers: they can put its PS at its trainers' level).
    several = (
        scope["con"]
        .sql("SELECT model_name FROM runs WHERE platform = 'cpu' GROUP BY ALL HAVING count(*) > 1")
        .pl()["model_name"]
    )
    assert several.len() >= 2
    assert answers[0].filter(pl.col("model_name").is_in(several.implode()))["ps_use_less"].all()
    scope["con"].close()


def test_fleet_sql_reads_stdin_says_what_is_wrong_and_never_writes(materialized_home, capsys, monkeypatch):
    home, *_ = materialized_home
    monkeypatch.setattr("sys.stdin", io.StringIO("SELECT 1 AS a; SELECT 'x;y' AS b;\n"))
    assert main(["sql", "--home", str(home.root)]) == 0
    out = capsys.readouterr().out
    assert "a\n-\n1\n(1 row)" in out and "x;y" in out
    assert main(["sql", "--home", str(home.root), "-c", "SELECT nope FROM runs"]) == 2
    assert "fleet sql: Binder Error" in capsys.readouterr().err
    assert main(["sql", "--home", str(home.root), "-c", "CREATE TABLE t AS SELECT 1"]) == 2
    assert "read-only" in capsys.readouterr().err
    assert main(["sql", "--home", str(home.root), "-c", ".tables"]) == 0
    assert "util_distribution" in capsys.readouterr().out
    assert main(["sql", "--home", str(home.root / "nowhere"), "-c", "SELECT 1"]) == 2
    assert "no analyst catalog" in capsys.readouterr().err


def test_fleet_sql_writes_no_file_and_reads_no_file_but_the_lakes(materialized_home, capsys):
    # COPY ... TO a lake file once exited 0 and overwrote it (runs then had 8 rows for 4 run ids), and any
    # file the user could read was readable.
    home, *_ = materialized_home
    target = lake.table_files(home, "runs")[0]
    before = Path(target).read_bytes()
    refused = {
        f"COPY (SELECT * FROM runs) TO '{target}' (FORMAT parquet)": "not COPY",
        f"EXPORT DATABASE '{home.root}/export'": "not EXPORT",
        f"ATTACH '{home.root}/other.duckdb'": "not ATTACH",
        "SET enable_external_access = true": "not SET",
        "INSTALL httpfs": "not LOAD",
        "SELECT 1; CREATE TEMP TABLE t AS SELECT 1": "not CREATE",  # refused before the first runs
        "SELECT * FROM read_text('/etc/hostname')": 'Cannot access file "/etc/hostname"',
        f"SELECT * FROM read_text('{home.report_path}')": "file system operations are disabled",
    }
    for statement, why in refused.items():
        assert main(["sql", "--home", str(home.root), "-c", statement]) == 2, statement
        out = capsys.readouterr()
        assert why in out.err and out.out == "" and len(out.err.splitlines()) == 1, (statement, out)
    assert Path(target).read_bytes() == before
    assert not (home.root / "export").exists() and not (home.root / "other.duckdb").exists()
    # the lake's own files stay readable, as the views read them
    assert (
        main(["sql", "--home", str(home.root), "-c", f"SELECT count(*) AS n FROM read_parquet('{target}')"])
        == 0
    )
    assert "(1 row)" in capsys.readouterr().out


def test_interactive_shell_runs_statements_as_they_end(materialized_home):
    home, *_ = materialized_home
    lines = iter(["SELECT count(*) AS n", "FROM runs;", "SELECT nope;", ".quit", "never read"])
    written: list[str] = []
    with sqlshell.connect(home.catalog_path, lake.store(home)) as con:
        sqlshell.interactive(con, lambda prompt: next(lines), written.append)
    assert (
        written[0].split()[0] == "n" and written[0].endswith("(1 row)") and written[1].startswith("Error: ")
    )
    assert next(lines) == "never read"


def test_the_cli_of_the_registries_is_not_what_the_guide_suggests():
    """The guide says why: the catalog is DuckDB 2's file format (the registries' CLI is 1.5.6)."""
    assert duckdb.__version__.startswith("2.")
    assert "fleet sql" in GUIDE and "duckdb-cli` 1.5.6" in GUIDE


def test_fleet_sql_passes_the_engines_hint_through(materialized_home, capsys):
    # The shell once printed only the first line of DuckDB's message, dropping its suggestion.
    home, *_ = materialized_home
    misspelt = {
        "SELECT gpu_utilization FROM utilisation_samples": ('Candidate bindings: "gpu_util"', 2),
        "SELECT count(*) FROM utilisation_sample": ('Did you mean "utilisation_samples"?', 2),
        "SELECT 1 +": ("LINE 1: SELECT 1 +", 3),
        "SELECT abs('a', 1) FROM runs": ("Candidate functions:", 5),  # a dozen candidates: the first few
    }
    for statement, (hint, lines) in misspelt.items():
        assert main(["sql", "--home", str(home.root), "-c", statement]) == 2, statement
        out = capsys.readouterr()
        assert out.err.startswith("fleet sql: ") and hint in out.err, (statement, out.err)
        assert len(out.err.splitlines()) == lines and out.out == "", (statement, out.err)
        assert ("more lines" in out.err) == (lines == 5), (statement, out.err)
    lines = iter(["SELECT gpu_utilization FROM utilisation_samples;", ".quit"])
    written: list[str] = []
    with sqlshell.connect(home.catalog_path, lake.store(home)) as con:
        sqlshell.interactive(con, lambda prompt: next(lines), written.append)
    assert written[0].startswith("Error: Binder Error") and '"gpu_util"' in written[0]
