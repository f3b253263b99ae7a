"""Where a run's steps execute: one of Dagster's executors, named in the run's configuration.

    execution: {config: {in_process: {}}}                    # the default: every step in the run's process
    execution: {config: {multiprocess: {max_concurrent: 2}}}  # a process per step, on this machine
    execution: {config: {celery: {broker: ..., config_source: {task_default_queue: fleet-steps}}}}

The last is dagster-celery's executor: each step a Celery task on the queue that `fleet worker`s serve
(`fleet run --executor celery` gives it to the days it sends when days are read in slices, so a day's
slices spread over the workers). Steps that run in other processes hand their outputs on through the IO
manager, which must then be on storage they all reach.
"""

import dagster as dg
from dagster_celery import celery_executor

EXECUTORS: dict[str, dg.ExecutorDefinition] = {
    "in_process": dg.in_process_executor,
    "multiprocess": dg.multiprocess_executor,
    "celery": celery_executor,
}


def _requirements(config) -> list[dg.ExecutorRequirement]:
    return [] if "in_process" in config else list(dg.multiple_process_executor_requirements())


@dg.executor(
    name="fleet",
    config_schema=dg.Field(
        dg.Selector({kind: e.config_schema.as_field() for kind, e in EXECUTORS.items()}),
        default_value={"in_process": {}},
    ),
    requirements=_requirements,
)
def fleet_executor(init_context: dg.InitExecutorContext) -> dg.Executor:
    """In-process (the default: on 2 cores ~3x faster than a process per step, and the steps that write
    the analyst catalog are serialised), multiprocess or Celery, as the run's configuration says."""
    ((kind, config),) = init_context.executor_config.items()
    chosen = EXECUTORS[kind]
    create = chosen.executor_creation_fn
    assert create is not None
    return create(dg.InitExecutorContext(init_context.job, chosen, config, init_context.instance))


@dg.definitions
def executor() -> dg.Definitions:
    return dg.Definitions(executor=fleet_executor)
