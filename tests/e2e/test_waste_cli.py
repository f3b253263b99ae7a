"""`fleet waste` as a user runs it (a subprocess of the installed command), after `fleet synth --truth` and
`fleet run`: the terminal answer, JSON, a day range, another target, and the mistakes it names."""

import json
import re

import polars as pl
import pytest

from pipelines.lib.paths import PROJECT_ROOT, DataHome
from pipelines.lib.storage import lake
from tests.support.cli import BIN, run

pytestmark = pytest.mark.usefixtures("fleet_cli")  # every test crosses the process boundary
DAYS = ["2026-11-01", "2026-11-02"]


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    root = tmp_path_factory.mktemp("waste_cli") / "home"
    env = {"DAGSTER_HOME": ""}
    synth = run(
        [str(BIN / "fleet"), "synth", "--home", str(root), "--days", "2", "--runs-per-day", "12"]
        + ["--start", DAYS[0], "--truth"],
        env=env,
    )
    assert synth.returncode == 0, synth.stderr[-2000:]
    assert f"truth (stragglers, hot shards, servers needed) is in {root / 'truth'}" in synth.stdout
    done = run([str(BIN / "fleet"), "run", "--home", str(root), "--workers", "1"], env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return DataHome.resolve(root)


def _waste(home, *args):
    return run([str(BIN / "fleet"), "waste", "--home", str(home.root), *args])


def test_truth_lies_beside_the_landing_root_and_was_not_ingested(home):
    for day in DAYS:
        assert (home.root / "truth" / "synthetic" / day / "waste_truth_roles.parquet").exists()
    ledger = lake.read_table(home, "ingest_ledger")
    assert not ledger["source_file"].str.contains("truth").any() and ledger.height == 4


def test_terminal_answer_states_what_to_win_back(home):
    p = _waste(home)
    assert p.returncode == 0, p.stderr
    eff = lake.read_table(home, "run_efficiency")
    out = p.stdout
    assert out.startswith(f"Where the fleet wastes machines: {DAYS[0]} .. {DAYS[1]} (2 days, 24 runs")
    assert f"recoverable {int(eff['servers_recoverable'].sum()):,} (" in out and " kW" in out
    for part in ("By role", "By model and platform", "Top ", "sparse_ps", "workload_model"):
        assert part in out


def test_json_answer_and_a_day_range(home):
    p = _waste(home, "--json", "--top", "3")
    assert p.returncode == 0, p.stderr
    view = json.loads(p.stdout)
    eff = lake.read_table(home, "run_efficiency")
    t = view["totals"]
    assert t["servers_recoverable"] == eff["servers_recoverable"].sum() and t["target_p95_util"] == [0.8]
    assert t["days"] == 2 and len(view["top_runs"]) == 3 and {"by_role", "by_day", "outliers"} <= set(view)
    assert sum(r["servers_recoverable"] for r in view["by_role"]) == t["servers_recoverable"]
    one = json.loads(_waste(home, "--json", "--from", DAYS[1], "--to", DAYS[1]).stdout)["totals"]
    per_day = eff.filter(pl.col("day") == pl.lit(DAYS[1]).str.to_date())["servers_recoverable"].sum()
    assert (one["days"], one["first_day"], one["servers_recoverable"]) == (1, DAYS[1], per_day)


def test_another_target_is_recomputed_from_the_stored_aggregates(home):
    default = json.loads(_waste(home, "--json").stdout)["totals"]
    strict = _waste(home, "--json", "--target", "0.5")
    assert strict.returncode == 0, strict.stderr
    t = json.loads(strict.stdout)["totals"]
    assert t["target_p95_util"] == [0.5] and t["n_servers"] == default["n_servers"]
    assert t["right_sized_servers"] > default["right_sized_servers"]


def test_mistakes_are_named_with_exit_2(home, tmp_path):
    backwards = _waste(home, "--from", DAYS[1], "--to", DAYS[0])
    assert backwards.returncode == 2 and f"--to {DAYS[0]} is before --from {DAYS[1]}" in backwards.stderr
    too_high = _waste(home, "--target", "1.5")
    assert too_high.returncode == 2 and "not a number in (0, 1]" in too_high.stderr
    nothing = _waste(home, "--from", "2020-01-01", "--to", "2020-01-02")
    assert (
        nothing.returncode == 2 and "no right-sized runs between 2020-01-01 and 2020-01-02" in nothing.stderr
    )
    empty = run([str(BIN / "fleet"), "waste", "--home", str(tmp_path / "empty")])
    assert empty.returncode == 2 and "no right-sizing in" in empty.stderr and "fleet run" in empty.stderr


def test_the_right_sizing_guides_example_is_what_this_fleet_prints(home):
    """The right-sizing guide's figures come from this run, not typed by hand: its header lines are the
    output's, and each top run it shows has the output's figures."""
    readme = (PROJECT_ROOT / "docs" / "how-to" / "right-sizing.md").read_text()
    block = readme.split("$ fleet waste --top 2\n", 1)[1].split("```", 1)[0].splitlines()
    p = _waste(home, "--top", "2")
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    head = block[: block.index("...")]
    assert head == out[: len(head)]
    rows = [line for line in block if re.match(r"\d{8}-\d{5} ", line)]
    assert len(rows) == 2
    for line in rows:
        got = next(o for o in out if o.startswith(line.split()[0]))
        for part in re.split(r"\s{2,}", line):
            assert part == "..." or part.removesuffix(" ...").rstrip(";") in got, (part, got)
    # the paragraph under the example reads its figures from the same run's line
    said = readme.split("Run 20261102-00011 (M2prod on the CPU cluster)", 1)[1].split("\n\n", 1)[0]
    got = next(o for o in out if o.startswith("20261102-00011"))
    claims = {
        "held 76 sparse PS whose CPUs reached a p95 of 0.48: 40": "sparse_ps 76 -> 40 (cpu p95 0.48 ->",
        "5 of its 25 readers": "reader 25 -> 5 ",
        "frees 56\nservers and 25.2 kW": " 56 ",
        "5 of its shards ran hot": "hot_shard x5,",
        "4.12x the median shard's memory bandwidth for 320\nminutes": "mem_bw 4.12x for 320 min",
    }
    for claim, shown in claims.items():
        assert claim in said and shown in got, (claim, shown)
    assert "25.2" in got
