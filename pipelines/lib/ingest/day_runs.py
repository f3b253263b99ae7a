"""The day's runs (small: in memory): accepted rows as their files deliver them, then settled once (first
delivery wins, across files and days) into the runs, their time windows and the runs another day holds;
samples are checked against those as they are staged."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from pipelines.lib.contracts import contract
from pipelines.lib.ingest import cross_row, dedupe
from pipelines.lib.ingest.cross_row import FILE, ORDER
from pipelines.lib.ingest.day_staging import DayStaging
from pipelines.lib.ingest.day_state import FileState
from pipelines.lib.ingest.entries import reject_frame
from pipelines.lib.ingest.line_texts import Allowed, finish_all_texts
from pipelines.lib.ingest.readers.base import ROW
from pipelines.lib.paths import DataHome


class DayRuns:
    """Runs as delivered (``parts``), then settled: ``runs``, ``windows``, ``dup_runs`` (run id -> the
    other day that holds it) and the key hashes of those runs' samples there."""

    def __init__(self) -> None:
        self.parts: list[pl.DataFrame] = []
        self.runs = pl.DataFrame()
        self.windows = pl.DataFrame()
        self.dup_runs: dict[str, str] = {}
        self.prior_sample_hashes: set[int] = set()

    def add(self, accepted: pl.DataFrame, rel: str, order: int) -> None:
        self.parts.append(
            accepted.with_columns(pl.lit(rel).alias(FILE), pl.lit(order, pl.Int32).alias(ORDER))
        )

    def forget(self, order: int) -> None:
        """Drop what file ``order`` delivered."""
        self.parts = [p for p in self.parts if not p.height or p[ORDER][0] != order]

    def settle(
        self,
        files: list[FileState],
        prior_runs: dict[str, str],
        home: DataHome,
        allowed: Allowed,
        raw_record_max_bytes: int,
    ) -> None:
        """Duplicate run ids (first delivery wins, across files and days); then the runs' time windows."""
        c = contract("runs")
        names = [x.name for x in c.landing_columns]
        if self.parts:
            runs = pl.concat(self.parts, how="vertical_relaxed")
        else:
            runs = (
                c.empty_frame()
                .select(names)
                .with_columns(
                    pl.lit(None, pl.String).alias(FILE),
                    pl.lit(None, pl.Int64).alias(ROW),
                    pl.lit(None, pl.Int32).alias(ORDER),
                )
            )
        from_lines = {f.order for f in files if f.from_lines}
        self.runs, rejects, self.dup_runs = cross_row.settle_runs(runs, prior_runs, from_lines)
        by_order = {f.order: f for f in files}
        touched = []
        for (order,), part in rejects.group_by(ORDER):
            f = by_order[order]
            f.rejects.add(reject_frame(part.drop(ORDER), fill=f.from_lines))
            touched.append(f)
        for f in files:
            if f.entry.table_name == "runs" and f.entry.problem is None:
                f.accepted = int((self.runs[ORDER] == f.order).sum())
        finish_all_texts(touched, allowed, raw_record_max_bytes)
        self.windows = cross_row.windows(self.runs)
        self.prior_sample_hashes = dedupe.prior_sample_hashes(home, self.dup_runs)

    def kept_extras(self, files: Iterable[FileState]) -> list[tuple[FileState, pl.DataFrame]]:
        """The extra fields of runs files, of the rows kept once the runs are settled."""
        kept = self.runs.select(ORDER, ROW)
        out = []
        for f in files:
            if f.entry.table_name == "runs" and f.run_extras:
                extras = pl.concat(f.run_extras)
                keep = kept.filter(pl.col(ORDER) == f.order)[ROW]
                f.run_extras = []
                out.append((f, extras.filter(pl.col(ROW).is_in(keep.implode()))))
        return out

    def drop_frames(self) -> None:
        """Forget the runs (a slice's state travels without them: the merge has the settled day's)."""
        self.parts, self.runs, self.windows = [], pl.DataFrame(), pl.DataFrame()


def stage_checked(
    f: FileState, acc: pl.DataFrame, runs: DayRuns, staged: DayStaging, *, exact: bool
) -> pl.Series:
    """Stage the accepted samples of a batch, less those a cross-row rule rejects; their rows."""
    none = pl.Series(ROW, [], pl.Int64)
    if not acc.height:
        return none
    crossed = none
    suspects = cross_row.suspects(acc, runs.windows)
    if suspects is not None and suspects.any():
        rej = cross_row.sample_rejects(
            acc.filter(suspects),
            runs.windows,
            runs.dup_runs,
            runs.prior_sample_hashes,
            from_lines=f.from_lines,
        )
        if rej.height:
            f.rejects.add(reject_frame(rej, fill=f.from_lines, judge=not exact))
            crossed = rej[ROW]
            acc = acc.filter(~pl.col(ROW).is_in(crossed.implode()))  # delivery order kept
    staged.write_samples(f, acc)
    return crossed
