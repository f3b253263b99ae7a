"""A newcomer's first answers (issue 44): a partial workload file still gets one, naming what it assumed;
numbers are written for people; advice that would not help is not given; printed commands run as shown."""

import os
import sys

import polars as pl
import pytest

from pipelines.cli import hints
from pipelines.lib.analysis.workload import assumed_line, from_config
from workload_model import defaults
from workload_model.alternatives import thousands


def test_a_partial_workload_file_starts_from_the_reference_shape_and_says_so(tmp_path):
    cfg = tmp_path / "tables_only.yaml"
    cfg.write_text("n_sparse_features: 52\nembedding_gb: 300\nbatch_cpu: 256\n")
    w = from_config(cfg)
    # the given fields win; what follows from them follows (a table per sparse feature, as the reference)
    assert (w["n_sparse_features"], w["embedding_gb"], w["batch_cpu"]) == (52, 300, 256)
    assert w["n_tables"] == 52
    ref = defaults.STARTING_SHAPE
    assert (w["embedding_dim"], w["bottom_mlp"], w["interaction"]) == (
        ref["embedding_dim"],
        ref["bottom_mlp"],
        ref["interaction"],
    )
    assert set(w["assumed"]) == {
        "n_dense_features",
        "n_tables",
        "embedding_dim",
        "mean_lookups_per_table",
        "bottom_mlp",
        "top_mlp",
        "interaction",
        "lookup_power_law_alpha",
        "batch_gpu",
    }
    line = assumed_line(w)
    assert line.startswith("not in the workload file, so taken as") and "embedding_dim=128" in line
    assert "embedding_gb" not in line and "batch_cpu" not in line


def test_a_complete_workload_file_assumes_only_what_it_leaves_out(tmp_path):
    cfg = tmp_path / "full.yaml"
    cfg.write_text("".join(f"{k}: {v}\n" for k, v in defaults.STARTING_SHAPE.items()) + "batch_size: 1024\n")
    w = from_config(cfg)
    assert w["assumed"] == {"lookup_power_law_alpha": str(defaults.LOOKUP_POWER_LAW_ALPHA)}


def test_thousands_separators():
    got = pl.DataFrame({"x": [0.4, 999.4, 999.6, 1000.0, 393461.2, 1234567.8, None]}).select(
        thousands(pl.col("x"))
    )["x"]
    assert got.to_list() == ["0", "999", "1,000", "1,000", "393,461", "1,234,568", None]


@pytest.fixture
def in_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_fleet_command_is_written_as_it_was_started(in_dir, monkeypatch):
    exe = in_dir / ".venv" / "bin" / "fleet"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert hints.program(str(exe)) == ".venv/bin/fleet"  # not on PATH: the path, from here
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}/usr/bin")
    assert hints.program(str(exe)) == "fleet"  # on PATH and the same one
    main_py = os.path.join("/src", "pipelines", "cli", "__main__.py")  # python -m pipelines.cli
    python = hints.program(main_py).removesuffix(" -m pipelines.cli")
    assert os.path.abspath(python) == os.path.abspath(sys.executable)  # the venv's python, not resolved
    assert hints.program("/somewhere/else/pytest") == "fleet"  # main() called by another program


def test_hints_keep_the_home_given_and_leave_other_text_alone(monkeypatch):
    monkeypatch.setattr(hints, "program", lambda: ".venv/bin/fleet")
    args = type("Args", (), {"home_given": "my data"})()
    text = "run `fleet run --force`, then `fleet worker --broker ...`; fleet run alone is not a command"
    assert hints.runnable(text, args) == (
        "run `.venv/bin/fleet run --home 'my data' --force`, then `.venv/bin/fleet worker --broker ...`; "
        "fleet run alone is not a command"
    )
    assert hints.command(None, "ui") == "`.venv/bin/fleet ui`"
