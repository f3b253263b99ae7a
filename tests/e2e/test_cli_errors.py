"""Every user error of `fleet` exits 2 with one line saying what is wrong and how to fix it
(issue 11, items 12 and 13); a failure of the machine exits 1 with its cause. In-process `main([...])`
where that is the same code path; the real `fleet` executable where the process boundary matters (slow)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.cli import main
from pipelines.lib.paths import INSTANCE_TEMPLATE, DataHome
from synthetic_fleet.writers import write_day
from tests.support.cli import BIN, run

# 341 bytes (the was 538): nine levels of nine aliases each, 9**9 (387 million) strings expanded.
ALIAS_BOMB = "\n".join(
    ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [f"{n}: &{n} [{','.join([f'*{p}'] * 9)}]" for p, n in zip("abcdefgh", "bcdefghi", strict=True)]
)

WORKLOAD = """\
n_dense_features: 13
n_sparse_features: 26
embedding_dim: 64
embedding_gb: {embedding_gb}
mean_lookups_per_table: 10
bottom_mlp: 512-256-64
top_mlp: 512-256-1
interaction: dot
"""


def user_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run `fleet argv` in-process; it must exit 2 with exactly one line on stderr, returned."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse exits itself
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.endswith("\n") and err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


def whatif(home: DataHome, *extra: str) -> list[str]:
    return ["whatif", "--model", "M1prod", "--platform", "cpu", "--home", str(home.root), *extra]


# fleet query


def test_query_without_a_catalog_says_to_build_it(capsys, home):
    err = user_error(capsys, ["query", "files_not_reconciling", "--home", str(home.root)])
    assert "no analyst catalog at" in err and "fleet run" in err


@pytest.mark.usefixtures("fleet_cli")
def test_query_while_a_writer_holds_the_catalog_names_the_holder(capsys, home):
    home.warehouse.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('held', flush=True); "
            "time.sleep(60)",
            str(home.catalog_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        err = user_error(capsys, ["query", "files_not_reconciling", "--home", str(home.root)])
        assert f"open for writing in process {holder.pid}" in err and "read-only: `fleet sql --home " in err
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("value", ["0", "10", "1000"])
def test_query_n_bins_is_not_a_choice(capsys, home, value):
    """n_bins=10 once ran and returned utilisations of 5-7: the bin count is a property of the stored
    histograms, so no value of it is taken."""
    err = user_error(
        capsys,
        ["query", "utilisation_quantiles_for_days", "--param", f"n_bins={value}", "--home", str(home.root)],
    )
    assert "n_bins is a property of the stored data (1000, schemas/util_distribution.yaml (n_bins))" in err


@pytest.mark.parametrize("value", ["99999999999999999999999", "\u0663", "\u00b2", "-3", "1e3"])
def test_a_count_parameter_is_an_ascii_whole_number_that_fits_64_bits(capsys, home, value):
    """A number past 64 bits, an Arabic-Indic three and a superscript two once reached DuckDB: a
    traceback rather than a line."""
    err = user_error(capsys, ["query", "waste_top_runs", "--param", f"top={value}", "--home", str(home.root)])
    assert f"--param top={value!r}: expected a whole number from 1 to 9,223,372,036,854,775,807" in err


def test_query_param_without_equals_is_refused(capsys, home):
    err = user_error(
        capsys, ["query", "server_counts_ps_based", "--param", "source", "--home", str(home.root)]
    )
    assert "'source' is not NAME=VALUE" in err and "--param source=pai" in err


# --config: a workload file


def test_config_with_a_yaml_syntax_error_names_line_and_column(capsys, home, tmp_path):
    cfg = tmp_path / "w.yaml"
    cfg.write_text("n_dense_features: [13\n")
    err = user_error(capsys, ["recommend", "--config", str(cfg), "--home", str(home.root)])
    assert f"{cfg}:2:1:" in err


def test_config_with_a_python_tag_is_refused_and_not_run(capsys, home, tmp_path):
    marker = tmp_path / "ran"
    cfg = tmp_path / "w.yaml"
    cfg.write_text(f'n_dense_features: !!python/object/apply:os.system ["touch {marker}"]\n')
    err = user_error(capsys, ["recommend", "--config", str(cfg), "--home", str(home.root)])
    assert "python/object/apply:os.system' is not allowed" in err and not marker.exists()


@pytest.mark.parametrize(
    ("embedding_gb", "extra", "says"),
    [
        ("1.0e300", "", "embedding_gb='1.0e300': must be a number >= 0 and <= 1000000"),
        ("100", "n_tables: 1000000000000000000000000000000\n", "n_tables=1000000000000000000000000000000"),
        ("100", "123: 5\n", "unknown field(s) [123]"),
        ("100", "~: 5\n", "unknown field(s) [~ (nothing)]"),
    ],
)
def test_config_with_a_huge_number_or_an_odd_key_is_refused(
    capsys, home, tmp_path, embedding_gb, extra, says
):
    cfg = tmp_path / "w.yaml"
    cfg.write_text(WORKLOAD.format(embedding_gb=embedding_gb) + extra)
    err = user_error(capsys, ["recommend", "--config", str(cfg), "--home", str(home.root)])
    assert says in err


@pytest.mark.parametrize("value", [".inf", "inf", "-.inf", ".nan", "1e999"])
def test_config_with_a_non_finite_number_is_refused(capsys, home, tmp_path, value):
    cfg = tmp_path / "w.yaml"
    cfg.write_text(WORKLOAD.format(embedding_gb=value))
    err = user_error(capsys, ["recommend", "--config", str(cfg), "--home", str(home.root)])
    assert "is not a finite number" in err


def test_config_alias_bomb_is_refused_quickly(capsys, home, tmp_path):
    cfg = tmp_path / "bomb.yaml"
    cfg.write_text(ALIAS_BOMB)
    assert len(ALIAS_BOMB) < 600
    start = time.perf_counter()
    err = user_error(capsys, ["recommend", "--config", str(cfg), "--home", str(home.root)])
    assert time.perf_counter() - start < 2
    assert "expands to more than 100,000 values" in err and len(err) < 300


def test_config_still_accepts_a_plain_workload(capsys, home, tmp_path):
    cfg = tmp_path / "w.yaml"
    cfg.write_text(WORKLOAD.format(embedding_gb=12.5))
    assert main(["recommend", "--config", str(cfg), "--json", "--home", str(home.root)]) == 0


# dates


def test_report_from_an_impossible_date(capsys, home):
    err = user_error(capsys, ["report", "--from", "2026-13-01", "--home", str(home.root)])
    assert "--from '2026-13-01' is not a date YYYY-MM-DD" in err


@pytest.mark.usefixtures("fleet_cli")
def test_ingest_from_an_impossible_date_exits_2_not_1(home):
    p = run([str(BIN / "fleet"), "ingest", "--from", "2026-13-01", "--home", str(home.root)])
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "--from '2026-13-01' is not a date YYYY-MM-DD" in p.stderr


def test_ingest_to_before_from(capsys, home):
    err = user_error(
        capsys, ["ingest", "--from", "2026-11-20", "--to", "2026-11-19", "--home", str(home.root)]
    )
    assert "--to 2026-11-19 is before --from 2026-11-20" in err


# the data home


@pytest.mark.parametrize("name", ["h[1]", "h*", "h{a,b}", "h?"])
def test_home_with_file_pattern_characters_is_refused(capsys, tmp_path, name):
    err = user_error(capsys, ["run", "--home", str(tmp_path / name)])
    assert "which the lake's readers take as a file pattern" in err and "FLEET_HOME" in err


@pytest.mark.usefixtures("fleet_cli")
def test_fleet_home_with_glob_characters_from_the_environment(tmp_path):
    p = run([str(BIN / "fleet"), "ingest"], env={"FLEET_HOME": str(tmp_path / "h[1]")})
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "h[1] contains '[]'" in p.stderr


@pytest.mark.parametrize("quote", ["'", '"'])
def test_home_with_a_quote_works(capsys, tmp_path, small_day, quote):
    home = DataHome.resolve(tmp_path / f"o{quote}brien")
    write_day(small_day, home.landing, source="synthetic", fmt="jsonl")
    assert main(["ingest", "--home", str(home.root)]) == 0
    assert main(["query", "files_not_reconciling", "--json", "--home", str(home.root)]) == 0
    assert capsys.readouterr().out.strip().endswith("[]")


# fleet whatif


def test_whatif_infinite_setting(capsys, home):
    err = user_error(capsys, whatif(home, "--set", "embedding_gb=inf"))
    assert "embedding_gb must be a finite number" in err


def test_whatif_empty_platform(capsys, home):
    err = user_error(capsys, ["whatif", "--model", "M1prod", "--platform", "", "--home", str(home.root)])
    assert "--platform '' names nothing" in err


@pytest.mark.parametrize(
    ("option", "spec", "says"),
    [
        ("--set", "embedding_gb=1e300", "embedding_gb='1e300': must be a number >= 0 and <= 1000000"),
        ("--set", "n_trainers=1e30", "n_trainers='1e30': must be a whole number >= 1 and <= 100000"),
        ("--sweep", "batch_size=1,1e300", "batch_size='1e300': must be a whole number >= 1 and <= 100000000"),
        ("--sweep", "n_trainers=1,1e30", "n_trainers='1e30'"),
    ],
)
def test_whatif_huge_numbers(capsys, home, option, spec, says):
    err = user_error(capsys, whatif(home, option, spec))
    assert says in err


@pytest.mark.parametrize("spec", ["n_sparse_features=", "n_sparse_features=,", "n_sparse_features"])
def test_whatif_empty_sweep(capsys, home, spec):
    err = user_error(capsys, whatif(home, "--sweep", spec))
    assert "expected FIELD=V1,V2,... with at least one value" in err


# the data home's own catalog


@pytest.mark.parametrize(
    ("text", "says", "entry"),
    [
        ("platforms: [oops\n", "hardware.yaml:2:1", None),
        ("platforms:\n  foo: 3\n", "platform 'foo' is not a mapping of fields", "'foo'"),
        ("- a list\n", "expected 'platforms:' mapping names to fields", None),
        ("platforms:\n  foo: {gpus: -1}\n", "field gpus must be a non-negative whole number", "'foo'"),
        (
            "platforms:\n  foo: {gpus: 1000000000000000000000000000000}\n",
            "gpus must be a non-negative whole number (>= 0 and <= 1024)",
            "'foo'",
        ),
        (
            "platforms:\n  foo: {gpus: 8, dram_gb: 1.0e300}\n",
            "dram_gb must be a non-negative number (>= 0 and <= 1e+06 GB)",
            "'foo'",
        ),
        ("platforms:\n  foo: {gpus: 8, dram_gb: 1e300}\n", "(YAML reads 1e9 as text: write 1.0e9)", "'foo'"),
        (
            "platforms:\n  123: {gpus: 8}\n",
            'a platform named 123: names are text; quote it ("123")',
            "named 123",
        ),
        (
            "platforms:\n  ~: {gpus: 8}\n",
            "a platform named ~ (nothing): names are text; give it a name",
            "named ~",
        ),
        ("platforms:\n  foo: !!python/name:os.system {}\n", "is not allowed", None),
    ],
)
def test_malformed_user_catalog(capsys, home, text, says, entry):
    home.user_catalog_dir.mkdir()
    (home.user_catalog_dir / "hardware.yaml").write_text(text)
    # One invalid entry (issue 20): a pipeline command refuses the catalog; a planning command names the
    # entry, leaves it out and answers with the others.
    err = user_error(capsys, ["ingest", "--home", str(home.root)] if entry else whatif(home))
    assert "user catalog" in err and says in err and ("move it away" in err or "move that file" in err)
    if entry:
        assert main(whatif(home)) == 0
        warned = capsys.readouterr().err
        assert entry in warned and "left out" in warned and len(warned.strip().splitlines()) == 1


# a failure of the machine is not the user's


def test_unwritable_lake_exits_1_with_the_cause(capsys, landed):
    Path(landed.lake_uri).write_text("a file where the lake folder should be")
    assert main(["ingest", "--home", str(landed.root)]) == 1
    err = capsys.readouterr().err
    assert "Not a directory" in err and landed.lake_uri in err and "Traceback" not in err


def test_a_lake_of_another_version_is_refused_in_one_line(capsys, landed):
    # A ledger written before its file hash became BLAKE3 (column sha256): named, never a traceback.
    from deltalake import write_deltalake

    from pipelines.lib.storage import lake

    assert main(["ingest", "--home", str(landed.root)]) == 0
    capsys.readouterr()
    store = lake.store(landed)
    old = store.read("ingest_ledger").rename({"blake3": "sha256"})
    write_deltalake(
        store.table_uri("ingest_ledger"), old.to_arrow(), mode="overwrite", schema_mode="overwrite"
    )
    assert main(["ingest", "--home", str(landed.root)]) == 1
    err = capsys.readouterr().err
    assert "ingest_ledger" in err and "sha256" in err and "another version" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_no_error_message_points_outside_the_repository():
    for path in Path(main.__code__.co_filename).parent.glob("*.py"):
        assert "../" + "shared" not in path.read_text(encoding="utf-8"), path  # split: a grep finds nothing


# ---------------------------------------------------------------- the machine fails: disk full

DISK_FULL = r"""
set -e
mount -t tmpfs -o size="$SIZE" tmpfs "$HOME_DIR"
cp -r "$LANDING" "$HOME_DIR/landing"
set +e
"$FLEET" run --home "$HOME_DIR" > "$OUT/stdout" 2> "$OUT/stderr"
echo $? > "$OUT/rc"
du -sk "$HOME_DIR" | cut -f1 > "$OUT/used_kb"
"$PYTHON" - "$HOME_DIR" > "$OUT/lake" <<'PY'
import sys
from pathlib import Path
import pyarrow.parquet as pq
from pipelines.lib.contracts import contracts
from pipelines.lib.storage.lake import Lake
lake = Lake(sys.argv[1] + "/lake")
files = [f for t in contracts() for f in lake.files(t)]
for p in files:
    pq.read_table(p)  # every published file is whole
staged = list((Path(sys.argv[1]) / "staging").glob("*"))
print(len(files), len(staged))
PY
"""


def _in_a_small_filesystem(tmp_path: Path, landing: Path, size_kb: int) -> dict:
    """`fleet run` with the data home on a tmpfs of ``size_kb`` (in a mount namespace of its own)."""
    out = tmp_path / f"out-{size_kb}"
    home = tmp_path / f"home-{size_kb}"
    out.mkdir()
    home.mkdir()
    dh = tmp_path / f"dh-{size_kb}"
    dh.mkdir()
    (dh / "dagster.yaml").write_text(INSTANCE_TEMPLATE.read_text())
    env = {
        **os.environ,
        "SIZE": f"{size_kb}k",
        "HOME_DIR": str(home),
        "LANDING": str(landing),
        "FLEET": str(BIN / "fleet"),
        "PYTHON": sys.executable,
        "PYTHONPATH": str(INSTANCE_TEMPLATE.parents[1]),  # the check below reads the lake's snapshot
        "OUT": str(out),
        "DAGSTER_HOME": str(dh),
        "DAGSTER_DISABLE_TELEMETRY": "1",
    }
    unshare = ["unshare", "--mount"] if os.geteuid() == 0 else ["unshare", "--map-root-user", "--mount"]
    p = subprocess.run(
        [*unshare, "sh", "-c", DISK_FULL], env=env, capture_output=True, text=True, timeout=600
    )
    assert p.returncode == 0, p.stderr
    return {
        "rc": int((out / "rc").read_text()),
        "stderr": (out / "stderr").read_text(),
        "used_kb": int((out / "used_kb").read_text()),
        "lake": (out / "lake").read_text().split(),
    }


@pytest.mark.usefixtures("fleet_cli")
def test_a_full_disk_during_fleet_run_is_one_line_exit_1_and_the_lake_stays_whole(tmp_path):
    landing = tmp_path / "landing"
    synth = ["synth", "--days", "1", "--start", "2026-11-10", "--runs-per-day", "12", "--out", str(landing)]
    assert main(synth) == 0  # the landing days; the runs below cross the process boundary
    roomy = _in_a_small_filesystem(tmp_path, landing, 200_000)
    assert roomy["rc"] == 0, roomy["stderr"]
    landing_kb = sum(f.stat().st_size for f in landing.rglob("*") if f.is_file()) // 1024
    # full while ingesting or analysing (half of what the run writes), and while writing the report
    for size_kb in (landing_kb + (roomy["used_kb"] - landing_kb) // 2, roomy["used_kb"] - 1024):
        full = _in_a_small_filesystem(tmp_path, landing, size_kb)
        assert full["rc"] == 1, full
        lines = full["stderr"].strip().splitlines()
        assert len(lines) == 1, full["stderr"][-3000:]
        assert lines[0].startswith(
            f"fleet run: the disk holding {tmp_path / f'home-{size_kb}'} filled up (now "
        )
        assert "No space left on device" in lines[0] and lines[0].endswith("run again"), lines[0]
        assert full["lake"][1] == "0"  # nothing left staged; every published Parquet file reads
