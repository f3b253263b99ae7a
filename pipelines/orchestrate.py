"""Run the real Dagster graph in-process for the CLI: every daily partition, then the merged and publish
assets; each as a run of the `nightly` job (with its partition), so the UI shows them like scheduled runs."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field

import dagster as dg
from filelock import FileLock

from pipelines.defs.partitions import add_days, split_complete
from pipelines.lib.errors import Unavailable
from pipelines.lib.exit_codes import ExitCode
from pipelines.lib.ingest.dedupe import dependent_days, dependent_note
from pipelines.lib.paths import INSTANCE_TEMPLATE, DataHome
from pipelines.lib.procs import exit_with_parent, stopping, this_worker
from pipelines.lib.settings import BROKER, IngestLimits, Settings
from pipelines.lib.storage import cache, lake
from pipelines.lib.storage.landing import inventory, landing_days
from pipelines.nightly import JOB, nightly_graph, nightly_job
from pipelines.runs import (
    HANDLED_BY,
    WAREHOUSE_POOL,
    WORKER_TAG,
    fail_dead_runs,
    failed_checks,
    pending_in_pool,
    pool_holders,
)

# The CLI prints its own lines (a failure as one line naming its cause, exit 1); Dagster's console logger
# would print each step failure with its stack trace first. The run's events stay in the instance (the UI).
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def run_config(home: DataHome, limits: IngestLimits | None = None) -> dict:
    """The run's configuration: quiet console, and the data home, the lake and the ingest limits (by
    default those of the environment where the day runs) given to its FleetHome."""
    fleet = {"home": str(home.root), "lake": home.lake_uri}
    if limits is not None:
        fleet["ingest_limits"] = json.dumps(dataclasses.asdict(limits))
    return {**QUIET, "resources": {"fleet": {"config": fleet}}}


class PoolBusy(Unavailable):
    """The warehouse pool stayed held by a live run longer than the settings' ``pool_wait_s``."""


class DaysFailed(Unavailable):
    """Day runs on workers failed (or their worker died); the other days are in the lake."""


class Stopped(Unavailable):
    """A signal (SIGTERM, SIGINT) stopped the runs; the days already written stay."""

    exit_code = ExitCode.STOPPED


@dataclass
class PipelineRun:
    days: list[str]  # the days that ran
    seconds: float
    run_ids: list[str]
    dead_runs_failed: list[str]
    failed_checks: dict[str, list[str]]  # day -> the checks of its run that did not pass
    unchanged: dict[str, str] = field(default_factory=dict)  # day skipped -> the run that already did it
    merged: bool = True  # False: nothing changed since the last merged run, which stands


DAY_INPUTS = "fleet/day_inputs"  # tag: what a day's run read (landing files, code, catalogs), hashed
MERGE_INPUTS = "fleet/merge_inputs"  # tag: what a merge run read (every landing day's inputs, code)
MERGED = "fleet/merge"  # tag: the run merged the days into the unpartitioned analyses, catalog and report
# The code a day's outputs depend on; the report's code counts for the merge run too.
DAY_CODE = ("pipelines", "sql", "schemas", "workload_model", "synthetic_fleet")


def day_inputs(home: DataHome, days: Sequence[str]) -> dict[str, str]:
    """Per day, a hash of what its run reads: its landing files (path, size, mtime), the code and the data
    home's own catalogs. Equal hashes: the day's outputs would come out the same."""
    code = cache.code_version(*DAY_CODE)
    catalogs = cache.files_version(home.user_catalog_dir / f for f in ("hardware.yaml", "models.yaml"))
    files: dict[str, list[str]] = {d: [] for d in days}
    for rel, (mtime_ns, size) in inventory(home).items():
        day = rel.split("/")[1]
        if day in files:
            files[day].append(f"{rel}:{size}:{mtime_ns}")
    return {d: cache.key(code, catalogs, *sorted(entries)) for d, entries in files.items()}


def _unchanged(home: DataHome, instance: dg.DagsterInstance, inputs: dict[str, str]) -> dict[str, str]:
    """The days (with the run that did them) whose inputs are those of a successful run of theirs and whose
    lake partition is still there."""
    unchanged = {}
    for day, key in inputs.items():
        before = _done_before(instance, DAY_INPUTS, key, day)
        if before and lake.table_files(home, HANDLED_BY, day):
            unchanged[day] = before
    return unchanged


def _merge_inputs(home: DataHome) -> str:
    """What a merge run reads: every landing day's inputs and the code (the report's too)."""
    every_day = day_inputs(home, split_complete(landing_days(home))[0])
    return cache.key(cache.code_version(*DAY_CODE, "dashboards"), *sorted(every_day.values()))


def _done_before(instance: dg.DagsterInstance, tag: str, value: str, day: str | None = None) -> str | None:
    """The id of a successful nightly run tagged ``tag=value`` (for ``day``), if any."""
    tags = {tag: value, **({"dagster/partition": day} if day else {})}
    runs = instance.get_runs(
        filters=dg.RunsFilter(job_name=JOB, tags=tags, statuses=[dg.DagsterRunStatus.SUCCESS]), limit=1
    )
    return runs[0].run_id if runs else None


def ensure_instance(home: DataHome) -> dg.DagsterInstance:
    """The instance in $DAGSTER_HOME, else <data home>/dagster_home (so `fleet ui` shows these runs)."""
    if not os.environ.get("DAGSTER_HOME"):
        home.dagster_home.mkdir(parents=True, exist_ok=True)
        os.environ["DAGSTER_HOME"] = str(home.dagster_home)
    dh = os.environ["DAGSTER_HOME"]
    cfg = os.path.join(dh, "dagster.yaml")
    if not os.path.exists(cfg):
        os.makedirs(dh, exist_ok=True)
        shutil.copyfile(INSTANCE_TEMPLATE, cfg)
    os.environ.setdefault("DAGSTER_DISABLE_TELEMETRY", "1")
    with _setup_lock(dh):  # two first nights: one creates and migrates the databases, the other opens them
        instance = dg.DagsterInstance.get()
        instance.get_runs(limit=1)
    return instance


def add_partitions(instance: dg.DagsterInstance, days: Sequence[str]) -> list[str]:
    """``days`` as partitions of the instance, those that are not yet, one night at a time; the days added."""
    with _setup_lock(instance.root_directory):
        return add_days(instance, days)


def _setup_lock(dagster_home: str) -> FileLock:
    """The lock of what two nights at once must not do together in one instance: create its SQLite
    databases (two creators leave two alembic heads, and every later night fails) and add the same
    partitions (one of two inserts of a key fails)."""
    return FileLock(os.path.join(dagster_home, ".fleet-setup.lock"))


def _run_day(
    home: DataHome,
    day: str,
    tags: dict[str, str],
    limits: IngestLimits,
    instance: dg.DagsterInstance | None = None,
) -> tuple[str, str, float, list[str]]:
    """One day's daily assets as one run of the nightly job (in this process on ``instance``, or in a worker
    process on the instance of $DAGSTER_HOME); the day, the run, its seconds and the checks that did not
    pass."""
    if stopping():
        raise KeyboardInterrupt  # told to stop before this day began: its run is not started
    start = time.perf_counter()
    instance = instance or ensure_instance(home)
    job, daily, _ = nightly_graph()
    res = job.execute_in_process(
        asset_selection=daily,
        partition_key=day,
        instance=instance,
        tags=tags,
        run_config=run_config(home, limits),
    )
    failed = [
        f"{e.asset_key.to_user_string()}/{e.check_name} ({e.severity.value.lower()}): {e.description}"
        for e in res.get_asset_check_evaluations()
        if not e.passed
    ]
    return day, res.run_id, time.perf_counter() - start, failed


def run_pipeline(
    home: DataHome,
    days: Sequence[str],
    *,
    instance: dg.DagsterInstance | None = None,
    progress: Callable[[str], None] = print,
    workers: int = 1,
    force: bool = False,
    settings: Settings | None = None,
) -> PipelineRun:
    """Every daily asset of each day, then the merged and publish assets (``_run_all``); a signal that
    interrupts a run raises ``Stopped`` (the days already written stay). ``settings`` (by default from the
    environment) choose where days execute and how long to wait."""
    settings = settings or Settings.resolve(home.root, home.lake_uri)
    try:
        return _run_all(
            home, days, instance=instance, progress=progress, workers=workers, force=force, settings=settings
        )
    except (dg.DagsterExecutionInterruptedError, KeyboardInterrupt) as exc:
        raise Stopped(
            "stopped by a signal (SIGTERM/SIGINT); the days already written stay, run again to finish"
        ) from exc


def _run_all(
    home: DataHome,
    days: Sequence[str],
    *,
    instance: dg.DagsterInstance | None = None,
    progress: Callable[[str], None] = print,
    workers: int = 1,
    force: bool = False,
    settings: Settings,
) -> PipelineRun:
    """Materialise every daily asset for each day, then every unpartitioned asset once (tagged with the
    last day's partition, as the nightly schedule's run would be). Runs left unfinished by a killed earlier
    process are marked failed first.

    A day whose landing files, code and catalogs are as they were for a successful run of it (``day_inputs``)
    is skipped, and so is the merge when nothing changed since the last one; ``force`` redoes them. With
    ``workers`` > 1, days run as concurrent runs of the nightly job in that many worker processes (days are
    independent; the lake serialises what must be). With the celery executor, days run on whichever
    `fleet worker`s take them (``workers`` does not apply) and the merge runs here. Days that are not
    partitions yet (today, the future) are reported and skipped. With no days, only the merged analyses
    and publishing run."""
    start = time.perf_counter()
    instance = instance or ensure_instance(home)
    dead, days = _open(instance, days, progress)
    job, daily, merged = nightly_graph()
    tags = {"fleet/trigger": "cli", WORKER_TAG: this_worker()}
    inputs = day_inputs(home, days)
    first, after, unchanged = _plan(home, instance, days, inputs, force, progress)
    log = _DayLog(first + sorted(after), progress)

    def day_tags(day: str) -> dict[str, str]:
        return {**tags, DAY_INPUTS: inputs[day]}

    for wave in [first, *([d] for d in sorted(after))]:
        _run_wave(home, instance, wave, day_tags, settings, workers, log.done, progress)
    merge_key = _merge_inputs(home)
    before = None if force or log.todo else _done_before(instance, MERGE_INPUTS, merge_key)
    if before:
        progress(
            f"  nothing changed since run {before[:8]}: the merged analyses, the analyst catalog and the "
            "report stand as it left them (--force redoes them)"
        )
        return PipelineRun(
            days=[],
            seconds=time.perf_counter() - start,
            run_ids=[],
            dead_runs_failed=dead,
            failed_checks={},
            unchanged=unchanged,
            merged=False,
        )
    t = time.perf_counter()
    progress(f"  merging {len(days)} day(s) of partials, rebuilding the analyst catalog and the report ...")
    last = days[-1] if days else _last_partition(home, instance)
    wait_for_pool(instance, WAREHOUSE_POOL, progress, settings.pool_wait_s)
    run_id = str(uuid.uuid4())
    with _PoolWatch(instance, WAREHOUSE_POOL, run_id, settings.pool_wait_s):
        res = job.execute_in_process(
            asset_selection=merged,
            partition_key=last,
            instance=instance,
            tags={**tags, MERGE_INPUTS: merge_key, MERGED: "every landing day"},  # not a run of `last`
            run_config=run_config(home, settings.ingest),
            run_id=run_id,
        )
    log.run_ids.append(res.run_id)
    progress(f"  merged analyses, analyst catalog, report ({time.perf_counter() - t:.1f} s)")
    return PipelineRun(
        days=log.todo,
        seconds=time.perf_counter() - start,
        run_ids=log.run_ids,
        dead_runs_failed=dead,
        failed_checks=dict(sorted(log.failed_checks.items())),
        unchanged=unchanged,
    )


def _open(
    instance: dg.DagsterInstance, days: Sequence[str], progress: Callable[[str], None]
) -> tuple[list[str], list[str]]:
    """Runs a killed earlier process left are marked failed, the days that are over added as partitions:
    (the dead runs, the days to run)."""
    dead = fail_dead_runs(instance)
    if dead:
        progress(f"  marked {len(dead)} run(s) of a killed earlier process failed: {', '.join(dead)}")
    complete, early = split_complete(days)
    if early:
        progress(
            f"  skipped {', '.join(early)}: not over yet (UTC), so not a day partition yet; run it tomorrow"
        )
    added = add_partitions(instance, complete)
    if added:
        progress(f"  added {len(added)} landed day(s) as partitions ({added[0]} .. {added[-1]})")
    return dead, complete


def _plan(
    home: DataHome,
    instance: dg.DagsterInstance,
    days: list[str],
    inputs: dict[str, str],
    force: bool,
    progress: Callable[[str], None],
) -> tuple[list[str], dict[str, list[str]], dict[str, str]]:
    """(the days to run together, the unchanged days to read again after them, the unchanged days)."""
    unchanged = {} if force else _unchanged(home, instance, inputs)
    todo = [d for d in days if d not in unchanged]
    # unchanged days whose quarantine refers to deliveries of a day read again: read again after it, one
    # at a time (each must see what the one before it kept)
    after = {d: on for d, on in dependent_days(home, todo).items() if d in unchanged}
    for day in after:
        del unchanged[day]
    for day, run_id in unchanged.items():
        progress(
            f"  [-] {day}: unchanged (landing files, code and catalogs as for run {run_id[:8]}); "
            "skipped (--force redoes it)"
        )
    for day, on in sorted(after.items()):
        progress(f"  [~] {day}: unchanged, but {dependent_note(on)}")
    return todo, after, unchanged


class _DayLog:
    """The days' runs as they finish, printed in date order as they become complete."""

    def __init__(self, todo: list[str], progress: Callable[[str], None]):
        self.todo, self.progress = todo, progress
        self.run_ids: list[str] = []
        self.failed_checks: dict[str, list[str]] = {}
        self.finished: dict[str, tuple[str, float, list[str]]] = {}

    def done(self, day: str, run_id: str, seconds: float, failed: list[str]) -> None:
        self.finished[day] = (run_id, seconds, failed)
        todo, run_ids = self.todo, self.run_ids
        while len(run_ids) < len(todo) and todo[len(run_ids)] in self.finished:
            d = todo[len(run_ids)]
            rid, secs, bad = self.finished[d]
            run_ids.append(rid)
            self.progress(f"  [{len(run_ids)}/{len(todo)}] {d}: raw -> core -> out partials ({secs:.1f} s)")
            for check in bad:
                self.progress(f"      check did not pass: {check}")
            if bad:
                self.failed_checks[d] = bad


def _run_wave(
    home: DataHome,
    instance: dg.DagsterInstance,
    wave: list[str],
    day_tags: Callable[[str], dict[str, str]],
    settings: Settings,
    workers: int,
    done: Callable[[str, str, float, list[str]], None],
    progress: Callable[[str], None],
) -> None:
    """Days that may run at once: on the Celery workers, in a pool of ``workers`` processes, or here."""
    if settings.executor == "celery" and wave:

        def tags_for(day: str) -> dict[str, str]:
            return {k: v for k, v in day_tags(day).items() if k != WORKER_TAG}  # a worker names itself

        _run_on_workers(home, instance, wave, tags_for, settings, done, progress)
    elif workers > 1 and len(wave) > 1:
        ctx = multiprocessing.get_context("spawn")  # no fork of a process with DuckDB and polars threads
        stop = ctx.Event()
        with ProcessPoolExecutor(
            max_workers=min(workers, len(wave)),
            mp_context=ctx,
            initializer=exit_with_parent,
            initargs=(os.getpid(), stop),
        ) as pool:
            try:
                with _signals_interrupt():
                    futures = [pool.submit(_run_day, home, d, day_tags(d), settings.ingest) for d in wave]
                    for fut in as_completed(futures):
                        done(*fut.result())
            except KeyboardInterrupt:
                stop.set()  # the workers end their days' runs as a signal would, then exit
                pool.shutdown(wait=True, cancel_futures=True)
                raise
    else:
        for day in wave:
            done(*_run_day(home, day, day_tags(day), settings.ingest, instance))


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    """SIGTERM, like SIGINT, interrupts this process's wait (as it does a run executing here): without it, a
    SIGTERM ended `fleet run` while its day pool ran, without a word."""

    def interrupt(_signo, _frame) -> None:
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _run_on_workers(
    home: DataHome,
    instance: dg.DagsterInstance,
    todo: list[str],
    tags_for: Callable[[str], dict[str, str]],
    settings: Settings,
    done: Callable[[str, str, float, list[str]], None],
    progress: Callable[[str], None],
) -> None:
    """Send each day's run to the Celery workers and wait for all; ``DaysFailed`` naming every day whose
    run failed or whose worker died (the days that succeeded stay in the lake)."""
    from pipelines import workers

    # The instance's run launcher reads its broker from $FLEET_BROKER (dagster.workers.yaml): --broker too.
    os.environ[BROKER.env] = settings.broker
    job, daily, _ = nightly_graph()
    config = run_config(home, settings.ingest)
    if settings.ingest.slice_bytes:  # the steps of a day, its slices among them, are shared by the workers
        config["execution"] = {"config": workers.step_executor()}
        config["resources"]["io_manager"] = {"config": {"base_dir": str(home.step_outputs)}}
    launched = workers.launch_days(
        instance,
        settings.broker,
        job,
        dg.reconstructable(nightly_job).get_python_origin(),
        daily,
        todo,
        config,
        tags_for,
    )
    failed: list[workers.DayOutcome] = []

    def finished(o: workers.DayOutcome) -> None:
        shutil.rmtree(home.step_outputs / o.run_id, ignore_errors=True)  # what its steps handed on
        if o.status != dg.DagsterRunStatus.SUCCESS:
            failed.append(o)
            progress(f"  [x] {o.day}: run {o.run_id[:8]} {o.status.value.lower()}: {o.error}")
            return
        checks = [
            f"{c.table}/{c.name} ({c.severity}): {c.description}" for c in failed_checks(instance, o.run_id)
        ]
        done(o.day, o.run_id, o.seconds, checks)

    workers.await_days(
        instance,
        launched,
        settings.broker,
        settings.worker_wait_s,
        settings.worker_silence_s,
        finished,
        progress,
    )
    if failed:
        lines = "; ".join(
            f"{o.day} (run {o.run_id[:8]}, worker {o.worker or 'none'}): {o.error}"
            for o in sorted(failed, key=lambda o: o.day)
        )
        raise DaysFailed(
            f"{len(failed)} of {len(todo)} day run(s) failed on the workers: {lines}. The other days are in "
            "the lake; nothing was merged or published. Run again to redo the failed days (see them in the "
            "Dagster UI)"
        )


def wait_for_pool(
    instance: dg.DagsterInstance, pool: str, progress: Callable[[str], None], timeout_s: float
) -> None:
    """Wait (sleeping) until ``pool`` has a free slot, freeing the slots of runs that are over or whose
    process is gone as it waits; ``PoolBusy`` after ``timeout_s`` with the holder named."""
    deadline = time.monotonic() + timeout_s
    told = False
    while True:
        fail_dead_runs(instance)
        holders = pool_holders(instance, pool)
        if not holders:
            return
        if not told:
            progress(f"  waiting for the '{pool}' pool, held by run {', '.join(holders)} ...")
            told = True
        if time.monotonic() >= deadline:
            raise PoolBusy(
                f"the '{pool}' pool is still held by run {', '.join(holders)} after {timeout_s:.0f} s; "
                "that run is alive (see it in the Dagster UI): wait for it or terminate it, then run again "
                "(FLEET_POOL_WAIT_S sets the wait)"
            )
        time.sleep(1.0)


class _PoolWatch:
    """While a run executes in this process: keep freeing the pool slots of runs that are over, and end
    the process with a clear message if the run waits for a slot past ``timeout_s`` or is told to stop
    (SIGTERM/SIGINT) while it waits (Dagster's wait for a slot neither sleeps nor heeds signals)."""

    def __init__(self, instance: dg.DagsterInstance, pool: str, run_id: str, timeout_s: float):
        self.instance, self.pool, self.run_id, self.timeout_s = instance, pool, run_id, timeout_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        # Dagster's handler only notes a signal while it executes; Python also writes the number of every
        # signal it handles to the wakeup descriptor, which this watch reads
        self._signals, self._wakeup = socket.socketpair()
        self._signalled = False

    def __enter__(self) -> _PoolWatch:
        for end in (self._signals, self._wakeup):
            end.setblocking(False)
        self._before = signal.set_wakeup_fd(self._wakeup.fileno(), warn_on_full_buffer=False)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        signal.set_wakeup_fd(self._before)
        self._signals.close()
        self._wakeup.close()

    def _told_to_stop(self) -> bool:
        """Whether SIGTERM or SIGINT reached this process since the watch began."""
        with contextlib.suppress(BlockingIOError):
            got = self._signals.recv(512)
            self._signalled |= any(n in (signal.SIGTERM, signal.SIGINT) for n in got)
        return self._signalled

    def _watch(self) -> None:
        waited = 0.0
        while not self._stop.wait(1.0):
            fail_dead_runs(self.instance)
            if not pending_in_pool(self.instance, self.pool, self.run_id):
                waited = 0.0
                continue
            waited += 1.0
            if self._told_to_stop():
                self._give_up("stopped (SIGTERM/SIGINT) while waiting for", ExitCode.STOPPED)
            if waited > self.timeout_s:
                self._give_up(f"waited {self.timeout_s:.0f} s for", ExitCode.FAILED)

    def _give_up(self, what: str, code: int) -> None:
        holders = pool_holders(self.instance, self.pool) or []
        message = f"{what} the '{self.pool}' pool, held by run {', '.join(holders) or '(none)'}"
        run = self.instance.get_run_by_id(self.run_id)
        if run is not None:
            self.instance.report_run_failed(run, message=message)
        self.instance.event_log_storage.free_concurrency_slots_for_run(self.run_id)
        print(f"fleet run: {message}; nothing was published, run it again", file=sys.stderr, flush=True)
        os._exit(code)


def _last_partition(home: DataHome, instance: dg.DagsterInstance) -> str | None:
    """The last landed day that is over (made a partition), or None if nothing landed."""
    landed, _ = split_complete(landing_days(home))
    if not landed:
        return None
    add_days(instance, landed[-1:])
    return landed[-1]
