"""The benchmark suite's data: synthetic landing days of a given size, generated once and cached."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

DAY = "2026-01-01"
SAMPLES_PER_RUN = 2_700  # roughly, for the default catalog: sizes the number of runs per day


def landing_day(data: Path, fmt: str, samples: int, day: str = DAY, seed: int = 7) -> Path:
    """A landing tree with one synthetic day of about ``samples`` samples (cached)."""
    runs = max(1, round(samples / SAMPLES_PER_RUN))
    return synthetic_day(data, fmt, runs, day, seed, name=f"{fmt}-{samples}-{day}")


def synthetic_day(data: Path, fmt: str, runs: int, day: str = DAY, seed: int = 7, name: str = "") -> Path:
    """A landing tree with one synthetic day of ``runs`` runs, as `fleet synth --days 1 --runs-per-day runs
    --seed seed --format fmt` writes it (cached)."""
    out = data / (name or f"{fmt}-runs{runs}-seed{seed}-{day}")
    if not (out / ".complete").exists():
        shutil.rmtree(out, ignore_errors=True)
        from synthetic_fleet.writers import write_fleet
        from workload_model.catalog import load_hardware, load_models

        write_fleet([day], runs, seed, load_hardware(), load_models(), out, fmt=fmt)
        (out / ".complete").touch()
    return out


def fresh_home(tmp: Path, landing_trees: list[Path]) -> Path:
    """A data home whose landing folder holds hard links to the cached landing trees."""
    home = tmp / "home"
    for tree in landing_trees:
        shutil.copytree(
            tree,
            home / "landing",
            copy_function=os.link,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns(".complete"),
        )
    return home


LINES_PER_SAMPLE = 100  # exposition samples per utilisation sample in the synthetic exporters' files (about)


def exposed_samples(tree: Path) -> int:
    """Sample lines of the OpenMetrics files under ``tree``."""
    n = 0
    for path in tree.rglob("*.om"):
        with open(path, "rb") as fh:
            n += sum(1 for line in fh if not line.startswith(b"#"))
    return n


def prometheus_day(data: Path, samples: int, day: str = DAY, seed: int = 7) -> Path:
    """A landing tree with one day of the synthetic exporters' files of at least ``samples`` exposition
    samples (cached): the fewest runs (in steps of a tenth) whose day reaches it."""
    out = data / f"openmetrics-{samples}-{day}"
    if not (out / ".complete").exists():
        from synthetic_fleet.exporters import exposition_samples
        from synthetic_fleet.sampler import sample_day
        from synthetic_fleet.writers import write_fleet
        from workload_model.catalog import load_hardware, load_models

        hw, models = load_hardware(), load_models()
        runs = max(1, round(samples / (SAMPLES_PER_RUN * LINES_PER_SAMPLE)))
        while exposition_samples(sample_day(day, runs, seed, hw, models), hw) < samples:
            runs += max(1, runs // 10)
        shutil.rmtree(out, ignore_errors=True)
        write_fleet([day], runs, seed, hw, models, out, fmt="openmetrics")
        (out / ".complete").touch()
    return out


def samples_file(tree: Path, fmt: str) -> Path:
    return next((tree / "synthetic").glob(f"*/utilisation_samples.{fmt}"))
