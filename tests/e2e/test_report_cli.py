"""`fleet report` writes the HTML, a PNG and an SVG per chart, offline, from aggregated tables only."""

import re
import shutil
from pathlib import Path

import pytest
from PIL import Image

from pipelines.cli import main
from tests.support.homes import DAY

pytestmark = pytest.mark.slow


def test_fleet_report_writes_html_png_and_svg(materialized_home, tmp_path, capsys):
    home, *_ = materialized_home
    out = tmp_path / "out"
    assert main(["report", "--home", str(home.root), "--out", str(out), "--from", DAY, "--to", DAY]) == 0
    assert f"report: {out}/fleet_report.html" in capsys.readouterr().out
    page = (out / "fleet_report.html").read_text()
    assert not re.search(r"<(script|link|img)[^>]*(src|href)\s*=\s*[\"']https?:", page, re.I)
    assert "cdn.jsdelivr" not in page
    names = re.findall(r'id="chart-([a-z_]+)"', page)
    for name in names:
        png, svg = out / "charts" / f"{name}.png", out / "charts" / f"{name}.svg"
        assert Image.open(png).size[0] > 200
        assert svg.read_text().lstrip().startswith("<svg")
        assert f'href="charts/{name}.png"' in page
    assert {
        "trainer_vs_ps",
        "server_counts",
        "hardware_fit",
        "whatif_sweeps",
        "placements",
        "calibration",
        "fleet_trends",
        "run_explorer",
    } <= set(names)


def test_report_never_reads_raw_samples(materialized_copy, tmp_path):
    home = materialized_copy
    shutil.rmtree(Path(home.lake_uri) / "utilisation_samples")  # the report must not need them
    assert main(["report", "--home", str(home.root), "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "fleet_report.html").exists()


def test_report_of_a_range_without_runs_exits_2_and_writes_nothing(materialized_home, tmp_path, capsys):
    home, *_ = materialized_home
    out = tmp_path / "out"
    code = main(
        ["report", "--home", str(home.root), "--out", str(out), "--from", "2019-01-01", "--to", "2019-01-05"]
    )
    assert code == 2 and not out.exists()
    err = capsys.readouterr().err
    assert (
        f"no runs from 2019-01-01 to 2019-01-05 in {home.lake_uri} (it holds runs of {DAY} .. {DAY})" in err
    )


def test_report_and_run_without_data_say_so_and_exit_2(tmp_path, capsys):
    assert main(["report", "--home", str(tmp_path / "empty")]) == 2
    assert "no runs in" in capsys.readouterr().err and not (tmp_path / "empty" / "reports").exists()
    landing = tmp_path / "h" / "landing" / "synthetic" / DAY
    landing.mkdir(parents=True)
    assert main(["run", "--home", str(tmp_path / "h"), "--from", "2026-10-01", "--to", "2026-10-02"]) == 2
    assert "no landing files for 2026-10-01..2026-10-02" in capsys.readouterr().err


def test_a_night_of_many_model_families_draws_the_busiest_by_name_and_keeps_every_answer(
    tmp_path, night, hw, models
):
    # 5,000 model names (a name per run) failed the night with a traceback: the hardware-fit chart held
    # 43,083 rows, over Altair's limit of 5,000. 700 families give it more than 5,000 rows.
    import polars as pl

    from pipelines.lib.analysis.recommend import Fleet
    from pipelines.lib.paths import DataHome
    from pipelines.lib.storage import lake
    from synthetic_fleet.sampler import sample_runs

    home = DataHome.resolve(tmp_path / "home")
    runs = sample_runs(DAY, 720, 7, hw, models)
    # 20 families with two runs each (the busiest), 680 with one
    name = pl.int_range(pl.len())
    runs = runs.with_columns(
        pl.format("team-model-{}", pl.when(name < 40).then(name // 2).otherwise(name - 20)).alias(
            "model_name"
        )
    ).select([c for c in runs.columns if not c.endswith("_util") and not c.startswith("_")])
    folder = home.landing / "synthetic" / DAY
    folder.mkdir(parents=True)
    runs.write_parquet(folder / "runs.parquet")
    night(home, [DAY])
    recs = lake.read_table(home, "recommendations")
    families = runs["model_name"].n_unique()
    usable = Fleet.from_runs(runs, hw).runs["model_name"].n_unique()  # families with a succeeded run
    assert families == 700 and recs["model_name"].n_unique() == usable > 600  # every one answered
    page = (home.reports / "fleet_report.html").read_text()
    assert f"{families:,}: the 12 with the most runs are drawn by name" in page
    assert 'id="chart-hardware_fit"' in page and "(other models)" in page
    assert "team-model-0" in page and "team-model-600" not in page
