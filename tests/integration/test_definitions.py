"""The code location loads, and its graph has the layers, partitions and jobs the product promises."""

import dagster as dg


def test_definitions_load_and_validate(definitions):
    d = definitions
    dg.Definitions.validate_loadable(d)
    graph = d.resolve_asset_graph()
    groups = {graph.get(k).group_name for k in graph.get_all_asset_keys()}
    assert groups == {"landing", "raw", "core", "out", "publish"}


def test_asset_keys_equal_contract_and_view_names(definitions):
    from pipelines.lib.contracts import contracts

    keys = {k.to_user_string() for k in definitions.resolve_asset_graph().get_all_asset_keys()}
    assert set(contracts()) <= keys


def test_nightly_job_and_schedule(definitions):
    d = definitions
    job = d.resolve_job_def("nightly")
    assert job.partitions_def is not None
    schedule = d.resolve_schedule_def("nightly_schedule")
    assert schedule.cron_schedule == "0 2 * * *"
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING


def test_column_schema_is_visible_before_any_run(definitions):
    specs = {s.key.to_user_string(): s for s in definitions.resolve_all_asset_specs()}
    schema = specs["utilisation_samples"].metadata["dagster/column_schema"]
    assert "cpu_util" in [c.name for c in schema.columns]
