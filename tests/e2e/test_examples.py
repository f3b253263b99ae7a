"""examples/: a user's own runs and samples (CSV and JSON Lines) and a workload file, used as the README
says; and what `fleet ingest` says about a file whose columns are misspelt or missing."""

import shutil

import polars as pl
import pytest

from pipelines.cli import main
from pipelines.lib.paths import PROJECT_ROOT

pytestmark = pytest.mark.slow
EXAMPLES = PROJECT_ROOT / "examples"
DAY = "2026-11-02"  # the CSV day of examples/telemetry; 2026-11-03 is the JSON Lines one


@pytest.fixture(scope="module")
def examples_home(tmp_path_factory):
    """examples/telemetry ingested and run into a data home of its own, with its own Dagster instance."""
    home = tmp_path_factory.mktemp("examples") / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("DAGSTER_HOME", raising=False)
        assert main(["ingest", str(EXAMPLES / "telemetry"), "--home", str(home)]) == 0
        assert main(["run", "--home", str(home)]) == 0
    return home


def test_the_example_files_are_ingested_whole(examples_home, capsys):
    assert main(["query", "catalog_totals", "--home", str(examples_home), "--json"]) == 0
    out = capsys.readouterr().out
    assert '"runs": 4' in out and '"rows_quarantined": 0' in out and '"landing_files": 4' in out


def test_recommend_answers_the_example_workload_and_then_from_the_cached_correction(examples_home, capsys):
    args = ["recommend", "--config", str(EXAMPLES / "workload.yaml"), "--home", str(examples_home)]
    assert main(args) == 0
    first = capsys.readouterr()
    assert "my_ctr_model: best throughput across the catalog" in first.out
    assert "  -> Recommended. " in first.out and "nothing in the catalog fits" not in first.out
    assert main(args) == 0
    second = capsys.readouterr()
    assert "read back (cached" in second.err  # `fleet run` fitted it; no call fits it again
    assert second.out == first.out


@pytest.mark.parametrize(
    "day, name", [(DAY, "utilisation_samples.csv"), ("2026-11-03", "utilisation_samples.jsonl")]
)
def test_a_misspelt_column_is_named_with_the_column_it_was_meant_to_be(tmp_path, capsys, day, name):
    landing = tmp_path / "in" / "my_cluster" / day
    shutil.copytree(EXAMPLES / "telemetry" / "my_cluster" / day, landing)
    path = landing / name
    path.write_text(
        path.read_text().replace("gpu_util", "gpu_utilization", 1 if name.endswith(".csv") else -1)
    )
    assert main(["ingest", str(tmp_path / "in"), "--home", str(tmp_path / "home")]) == 0
    out = capsys.readouterr().out
    assert f"FIX my_cluster/{day}/{name}: column(s) 'gpu_utilization' (did you mean 'gpu_util'?)" in out


def _ingested(tmp_path, change) -> str:
    """What `fleet ingest` prints for the example CSV day after ``change(landing folder)``."""
    landing = tmp_path / "in" / "my_cluster" / DAY
    shutil.copytree(EXAMPLES / "telemetry" / "my_cluster" / DAY, landing)
    change(landing)
    assert main(["ingest", str(tmp_path / "in"), "--home", str(tmp_path / "home")]) == 0
    return landing


def test_a_missing_column_is_one_line_naming_the_column_that_holds_it(tmp_path, capsys):
    def rename(landing):
        samples = pl.read_csv(landing / "utilisation_samples.csv")
        samples.rename({"net_bw_util": "net_bandwidth_util"}).write_csv(landing / "utilisation_samples.csv")

    landing = _ingested(tmp_path, rename)
    out = capsys.readouterr().out
    rows = pl.read_csv(landing / "utilisation_samples.csv").height
    assert (
        f"FIX my_cluster/{DAY}/utilisation_samples.csv: required field 'net_bw_util' is missing from all "
        f"{rows:,} rows; the file has 'net_bandwidth_util': rename it to 'net_bw_util'"
    ) in out
    # one example per reason, naming file, row and field
    assert (
        f"missing_required: {rows:,}, e.g. my_cluster/{DAY}/utilisation_samples.csv row 2, net_bw_util:"
        in out
    )


def test_a_sample_of_a_refused_run_points_at_the_refused_run_row(tmp_path, capsys):
    def refuse(landing):
        runs = (landing / "runs.csv").read_text()
        (landing / "runs.csv").write_text(runs.replace(",cpu,remote_ps,8,", ",cpu,remote_ps,-8,"))

    _ingested(tmp_path, refuse)
    out = capsys.readouterr().out
    assert f"quarantine entries out_of_bounds: 1, e.g. my_cluster/{DAY}/runs.csv row 3, n_trainers:" in out
    assert (
        f"run_id ctr-{DAY}-cpu has no accepted run record in this day's landing files "
        "(its run row was refused: "
        f"my_cluster/{DAY}/runs.csv row 3, out_of_bounds: 'n_trainers' = -8 is below the minimum 1 servers)"
    ) in out
