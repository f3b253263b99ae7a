"""Days on workers: each day's run of the nightly job is launched by the instance's run launcher,
dagster-celery's ``CeleryRunLauncher`` (named in the instance's dagster.yaml), as its Celery task on a Redis
broker, and executed by whichever `fleet worker` takes it with dagster-celery's own run task: in-process
inside the worker, as a local day is, or, when days are read in slices, with dagster-celery's executor,
whose step tasks (a day's slices among them) every `fleet worker` also serves, on a queue of their own.
Workers open the same instance ($DAGSTER_HOME: its database is PostgreSQL, so workers on other machines
reach it); the run configuration names the data home and the lake.

A worker names itself on the run (``fleet/worker``) the moment it takes it, so a worker killed mid-day leaves
a run that the waiting `fleet run` (or any later one) marks failed; running the day again redoes it whole
(a day is replaced in one commit, never appended to).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg

from pipelines.lib.errors import Unavailable
from pipelines.lib.procs import this_worker
from pipelines.lib.settings import BROKER, WORKER_NAME, scrubbed, shown
from pipelines.runs import FINISHED, WORKER_TAG, fail_dead_runs

QUEUE = "dagster"  # dagster-celery's queue: the day runs
STEP_QUEUE = "fleet-steps"  # the steps of day runs executed by dagster-celery's executor
CELERY_WORKER_TAG = "fleet/celery_worker"  # the worker's Celery name (fleet@host by default)
POLL_S = 0.5
_IN_RUN_TASK = contextlib.ExitStack()


class NoWorker(Unavailable):
    """No worker answered the broker in time: none is running against it."""


class BrokerDown(Unavailable):
    """The broker did not answer or did not take a day's run."""


class LauncherMismatch(Unavailable):
    """The Dagster instance does not launch runs on the workers of the broker named."""


def _app_config() -> dict:
    from dagster_celery.config import DEFAULT_CONFIG

    return {
        **DEFAULT_CONFIG,
        # A worker takes a day only when it has a free slot: with prefetch, one busy worker would hold the
        # next day while another sits idle, and a killed worker would take the held day with it.
        "worker_disable_prefetch": True,
        "worker_prefetch_multiplier": 1,
        "task_track_started": True,
        "broker_connection_retry_on_startup": True,
        "worker_hijack_root_logger": False,
    }


def celery_app(broker: str):
    """The Celery app of dagster-celery's run and step tasks on ``broker`` (results on the same Redis)."""
    from dagster_celery.make_app import make_app
    from dagster_celery.tasks import create_execute_job_task, create_task

    app = make_app({"broker": broker, "backend": broker, "include": [], "config_source": _app_config()})
    create_execute_job_task(app)
    create_task(app)
    return app


def step_executor() -> dict:
    """The run configuration's executor of a day run whose steps the workers share: dagster-celery's, its
    steps sent to STEP_QUEUE on the broker of $FLEET_BROKER (named, never written: run configurations are
    stored and shown)."""
    broker = {"env": BROKER.env}
    return {
        "celery": {"broker": broker, "backend": broker, "config_source": {"task_default_queue": STEP_QUEUE}}
    }


def _name_the_worker(task=None, kwargs=None, **_signal) -> None:
    """Before dagster-celery's run task executes a day's run in this process, name the process (and its
    Celery worker) on the run, so a worker killed mid-day is found (``fail_dead_runs``, the broker's
    ping), and let the run wait for its steps' tasks. A run already over (canceled while queued) is left
    alone; dagster's run task then does not start it."""
    from celery.result import allow_join_result
    from dagster_celery.config import TASK_EXECUTE_JOB_NAME

    if task is None or task.name != TASK_EXECUTE_JOB_NAME or not kwargs:
        return
    # dagster-celery's executor waits for the run's step tasks inside this task (their own queue and
    # workers: no deadlock); Celery forbids waiting in a task unless told. The process ends with the task.
    _IN_RUN_TASK.enter_context(allow_join_result())
    # The launcher's arguments, a value dagster serialised: only the run's id is read from them.
    args: Any = dg.deserialize_value(json.dumps(kwargs["execute_job_args_packed"]))
    run_id: str = args.run_id
    with dg.DagsterInstance.get() as instance:
        run = instance.get_run_by_id(run_id)
        if run is not None and run.status not in FINISHED:
            instance.add_run_tags(
                run_id, {WORKER_TAG: this_worker(), CELERY_WORKER_TAG: task.request.hostname}
            )


def serve(broker: str, concurrency: int, name: str, steps: int) -> None:
    """Run a Celery worker on ``broker`` until it is stopped (SIGTERM: finish the days in hand, then exit):
    ``concurrency`` days at a time, each in a fresh process; beside it, a worker of the steps that day runs
    share (``steps`` at a time), which stops with it."""
    from celery.signals import task_prerun
    from celery.utils.nodenames import host_format

    # Loaded once here and forked into every day's process: importing starts no thread (polars and DuckDB
    # start theirs on first use, in the day's process).
    import pipelines.lib.ingest.day
    import pipelines.lib.storage.lake
    import pipelines.nightly  # noqa: F401

    logging.getLogger("alembic").setLevel(logging.WARNING)  # the instance's schema checks, once per day
    os.environ[WORKER_NAME.env] = host_format(name)
    task_prerun.connect(_name_the_worker, weak=False)
    stepper = subprocess.Popen(
        [sys.executable, "-c", f"from {__name__} import serve_steps; serve_steps({name!r}, {steps})"],
        env={**os.environ, BROKER.env: broker},  # not in its arguments, which every user of the machine sees
    )
    try:
        celery_app(broker).worker_main(_worker_argv(QUEUE, concurrency, name, "INFO"))
    finally:
        stepper.terminate()  # a warm shutdown: the steps in hand finish
        stepper.wait()


def serve_steps(name: str, processes: int) -> None:
    """The step worker of `fleet worker` ``name``: ``processes`` steps at a time, each in a fresh process;
    it stops when its `fleet worker` is gone."""
    import pipelines.nightly

    pipelines.nightly.nightly_graph()  # built once, forked into every step's process
    parent = os.getppid()

    def stop_with_parent() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=stop_with_parent, daemon=True).start()
    celery_app(os.environ[BROKER.env]).worker_main(
        _worker_argv(STEP_QUEUE, processes, f"steps.{name}", "WARNING")
    )


def _worker_argv(queue: str, concurrency: int, name: str, loglevel: str) -> list[str]:
    return [
        "worker",
        f"--queues={queue}",
        f"--concurrency={concurrency}",
        f"--hostname={name}",
        "--pool=prefork",
        "--max-tasks-per-child=1",  # a day's (a step's) memory goes back to the system when it ends
        "--without-gossip",
        "--without-mingle",
        f"--loglevel={loglevel}",
    ]


@dataclass
class Launched:
    day: str
    run_id: str


def check_reachable(broker: str) -> None:
    """``BrokerDown`` unless the broker answers (before any run is created for it)."""
    app = celery_app(broker)
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=2, interval_start=0.2, interval_step=0.5)
    except Exception as exc:  # kombu and redis-py raise several types
        raise BrokerDown(
            f"the broker {shown(broker)} does not answer ({scrubbed(exc, broker)}); start it (redis-server) "
            "or fix $FLEET_BROKER; no day was sent"
        ) from None


def check_launcher(instance: dg.DagsterInstance, broker: str) -> None:
    """``LauncherMismatch`` unless the instance launches runs with dagster-celery's ``CeleryRunLauncher`` on
    ``broker`` (its dagster.yaml decides where runs go)."""
    from dagster_celery.launcher import CeleryRunLauncher

    how = "copy dagster_home/dagster.workers.yaml to $DAGSTER_HOME/dagster.yaml"
    try:
        launcher = instance.run_launcher
    except Exception as exc:  # the instance's run_launcher section does not load (dagster's config errors)
        raise LauncherMismatch(
            f"the run launcher of the Dagster instance at {instance.root_directory} does not load "
            f"({scrubbed(str(exc).splitlines()[0], broker)}); {how} and set $FLEET_BROKER"
        ) from None
    if not isinstance(launcher, CeleryRunLauncher):
        raise LauncherMismatch(
            f"the Dagster instance at {instance.root_directory} launches runs with "
            f"{type(launcher).__name__}, not on workers: days on workers need dagster-celery's "
            f"CeleryRunLauncher in its dagster.yaml ({how})"
        )
    if launcher.broker != broker:
        raise LauncherMismatch(
            f"the Dagster instance at {instance.root_directory} sends runs to the broker "
            f"{shown(launcher.broker or 'amqp (its default)')}, not to {shown(broker)}: set the "
            "run_launcher's broker in its dagster.yaml to {env: FLEET_BROKER}"
        )


def launch_days(
    instance: dg.DagsterInstance,
    broker: str,
    job: dg.JobDefinition,
    origin,
    selection: list[dg.AssetKey],
    days: list[str],
    run_config: Mapping,
    tags_for: Callable[[str], dict[str, str]],
) -> list[Launched]:
    """Create each day's run of ``job`` (its daily assets) and launch it with the instance's run launcher,
    which sends it to the workers' queue and tags it with its Celery task. A run the broker did not take is
    marked failed and ``BrokerDown`` raised (the days sent before it stay queued)."""
    check_launcher(instance, broker)
    check_reachable(broker)
    out: list[Launched] = []
    for day in days:
        run = instance.create_run_for_job(
            job_def=job,
            run_config=run_config,
            tags={**tags_for(day), "dagster/partition": day},
            asset_selection=frozenset(selection),
            job_code_origin=origin,
        )
        try:
            # CeleryRunLauncher reads the run (its code origin) and never the workspace, which only a
            # code server has: runs created here launch without one.
            instance.launch_run(run.run_id, workspace=None)  # pyright: ignore[reportArgumentType]
        except Exception as exc:
            why = f"the broker {shown(broker)} did not take it ({scrubbed(exc, broker)})"
            instance.report_engine_event(why, run)
            raise BrokerDown(
                f"day {day}: {why}; {len(out)} day run(s) sent before it stay queued for the workers"
            ) from None
        instance.report_engine_event(f"sent to the workers' queue on {shown(broker)}", run)
        out.append(Launched(day, run.run_id))
    return out


@dataclass
class DayOutcome:
    day: str
    run_id: str
    seconds: float
    status: dg.DagsterRunStatus
    worker: str
    error: str  # why it failed ("" when it succeeded)


def await_days(
    instance: dg.DagsterInstance,
    launched: list[Launched],
    broker: str,
    worker_wait_s: float,
    silence_s: float,
    on_done: Callable[[DayOutcome], None],
    progress: Callable[[str], None],
) -> list[DayOutcome]:
    """Wait until every launched run is over, calling ``on_done`` as each ends. On the way, a run is marked
    failed when its worker process is gone (on this machine), when its Celery task ended without it (the
    day's process was lost, or it failed before the run could start, on any machine), or when its worker
    has not answered the broker's ping for ``silence_s`` (killed, frozen or unreachable). Runs wait in the
    queue as long as some worker answers; ``NoWorker`` when none answered for ``worker_wait_s`` while
    none of these runs was running (the runs still queued are canceled). Stopped while waiting (a signal),
    the runs no worker took yet are canceled."""
    pending = {x.run_id: x for x in launched}
    outcomes: list[DayOutcome] = []
    watch = _Watch(celery_app(broker), broker, silence_s)
    told = False
    last_seen = time.monotonic()  # the last time a worker answered or held one of these runs
    try:
        while pending:
            fail_dead_runs(instance)
            runs = instance.get_runs(filters=dg.RunsFilter(run_ids=list(pending)))
            watch.check(instance, [r for r in runs if r.status not in FINISHED])
            # read again: the watch may have just failed some of them
            for run in instance.get_runs(filters=dg.RunsFilter(run_ids=list(pending))):
                if run.status not in FINISHED:
                    continue
                x = pending.pop(run.run_id)
                ok = run.status == dg.DagsterRunStatus.SUCCESS
                worker = run.tags.get(WORKER_TAG, "")
                error = "" if ok else _why(instance, run)
                outcome = DayOutcome(x.day, x.run_id, _seconds(instance, x.run_id), run.status, worker, error)
                outcomes.append(outcome)
                on_done(outcome)
            if not pending:
                break
            if watch.busy or watch.workers_answer:
                last_seen = time.monotonic()
            idle = time.monotonic() - last_seen
            if not told and idle > 5:
                progress(f"  waiting for a worker on {shown(broker)} (start one with `fleet worker`) ...")
                told = True
            if idle > worker_wait_s:
                _cancel(instance, list(pending), f"no worker answered the broker in {worker_wait_s:.0f} s")
                days = ", ".join(x.day for x in pending.values())
                raise NoWorker(
                    f"no worker took day run(s) {days}: none answered on broker {shown(broker)} for "
                    f"{worker_wait_s:.0f} s. Start one with `fleet worker --broker ...` on a machine that "
                    "reaches the broker, the Dagster instance's database and the data home, then run again "
                    "($FLEET_WORKER_WAIT_S sets the wait)"
                )
            time.sleep(POLL_S)
    except BaseException:
        _cancel(instance, list(pending), "fleet run was stopped before a worker took it")
        raise
    return outcomes


class _Watch:
    """What the broker knows about the runs in flight, asked every PING_EVERY_S: which workers answer a
    ping, and how each run's Celery task ended. A run whose task ended without the run (its process was
    lost, or it failed before the run started) or whose worker has not answered for ``silence_s`` is marked
    failed: nothing else would tell of a worker on another machine."""

    PING_EVERY_S = 5.0

    def __init__(self, app, broker: str, silence_s: float):
        self.app, self.broker, self.silence_s = app, broker, silence_s
        self.heard: dict[str, float] = {}  # worker name -> when it last answered (or was first seen)
        self.asked = 0.0
        self.busy = False  # some run of these is held by a worker
        self.workers_answer = False  # some worker answered the last ping

    def check(self, instance: dg.DagsterInstance, unfinished: list[dg.DagsterRun]) -> None:
        from dagster_celery.tags import DAGSTER_CELERY_TASK_ID_TAG

        held = [r for r in unfinished if r.tags.get(WORKER_TAG)]
        self.busy = bool(held)
        now = time.monotonic()
        if now - self.asked < self.PING_EVERY_S:
            return
        self.asked = now
        for run in unfinished:
            task = run.tags.get(DAGSTER_CELERY_TASK_ID_TAG)
            result = self.app.AsyncResult(task) if task else None
            if result is not None and result.state in ("FAILURE", "REVOKED"):
                why = scrubbed(result.result, self.broker) if result.state == "FAILURE" else "revoked"
                instance.report_run_failed(
                    run,
                    message=f"its Celery task ended without it ({why}): the day's process was lost or "
                    "could not start the run. Re-run the day to redo it.",
                )
        replies = self.app.control.ping(timeout=3.0)
        answered = {name for reply in replies for name in reply}
        self.workers_answer = bool(answered)
        now = time.monotonic()
        for name in answered:
            self.heard[name] = now
        for run in held:
            name = run.tags.get(CELERY_WORKER_TAG, "")
            quiet = now - self.heard.setdefault(name, now)
            if name and quiet > self.silence_s:
                instance.report_run_failed(
                    run,
                    message=f"its worker {name} has not answered the broker for {quiet:.0f} s (killed, "
                    "frozen, or its machine is gone); marked failed so the night moves on. Re-run the day "
                    "to redo it.",
                )


def _seconds(instance: dg.DagsterInstance, run_id: str) -> float:
    """How long the run executed on its worker (0 if it never started)."""
    record = instance.get_run_record_by_id(run_id)
    if record is None or record.start_time is None or record.end_time is None:
        return 0.0
    return record.end_time - record.start_time


def _why(instance: dg.DagsterInstance, run: dg.DagsterRun) -> str:
    """The first step failure's message, else the run failure's."""
    for kind in (dg.DagsterEventType.STEP_FAILURE, dg.DagsterEventType.RUN_FAILURE):
        for record in instance.all_logs(run.run_id, of_type=kind):
            event = record.dagster_event
            data = event.event_specific_data if event else None
            error = getattr(data, "error", None)
            if error is not None:
                return error.message.strip().splitlines()[-1].rstrip(".")
            if record.message:
                return record.message.rstrip(".")
    return run.status.value.lower()


def _cancel(instance: dg.DagsterInstance, run_ids: list[str], why: str) -> None:
    """Mark the runs no worker took as canceled (a worker that takes one later finds it over and leaves
    it); a run a worker holds goes on."""
    if not run_ids:
        return
    for run in instance.get_runs(filters=dg.RunsFilter(run_ids=run_ids)):
        if run.status not in FINISHED and not run.tags.get(WORKER_TAG):
            instance.report_run_canceled(run, message=why)
