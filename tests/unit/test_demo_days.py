"""The demo's fleet does not depend on the date it runs: any DAY_CYCLE consecutive days hold the same draws,
so the report's observed figures agree with the calibration computed on the fixed-date demo fleet."""

import datetime as dt

import polars as pl

from synthetic_fleet.sampler import sample_day
from synthetic_fleet.servers import DAY_CYCLE


def _fleet(first: dt.date, hw, models) -> pl.DataFrame:
    days = [str(first + dt.timedelta(days=i)) for i in range(DAY_CYCLE)]
    runs = pl.concat([sample_day(d, 20, 2021, hw, models).runs for d in days])
    timeless = [c for c in runs.columns if c not in ("run_id", "start_ts", "end_ts", "day", "_day")]
    return runs.select(timeless).sort(timeless)


def test_any_window_of_the_cycle_holds_the_same_fleet(hw, models):
    calibration_window = _fleet(dt.date(2026, 11, 1), hw, models)  # synthetic_fleet.sampler.default_fleet
    for first in (dt.date(2026, 11, 27), dt.date(2027, 2, 28), dt.date(2031, 7, 4)):
        assert _fleet(first, hw, models).equals(calibration_window)


def test_consecutive_days_still_differ(hw, models):
    a, b = (sample_day(d, 20, 2021, hw, models).runs for d in ("2026-11-20", "2026-11-21"))
    assert not a["throughput_eps"].equals(b["throughput_eps"])


def test_no_pile_up_of_sparse_ps_at_the_cap(hw, models):
    """Runs that would want more sparse PS than the cap get counts spread over the top of the fleet's range,
    not the cap itself (clipping made 128 the CPU fleet's modal count)."""
    runs = sample_day("2026-11-26", 600, 2021, hw, models).runs
    ps = runs.filter(pl.col("placement") == "remote_ps")["n_sparse_ps"]
    cap = 2 * hw.remote_ps_max_servers
    assert ps.max() <= cap and (ps == cap).sum() <= 1
    assert ps.mode().max() < cap // 2
