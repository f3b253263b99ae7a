"""A snapshot of the asset graph: an accidental rename, dropped dependency, check or partitioning fails CI.

After an intended change:
    UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/integration/test_definitions_snapshot.py
"""

import json
import os
from pathlib import Path

SNAPSHOT = Path(__file__).parent / "snapshots" / "definitions.json"


def graph_snapshot(definitions) -> dict:
    graph = definitions.resolve_asset_graph()
    assets = {}
    for key in sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()):
        node = graph.get(key)
        assets[key.to_user_string()] = {
            "group": node.group_name,
            "deps": sorted(k.to_user_string() for k in node.parent_keys),
            "partitions": str(node.partitions_def) if node.partitions_def else None,
            "kinds": sorted(node.kinds),
            "materializable": node.is_materializable,
            "checks": sorted(k.name for k in node.check_keys),
            "freshness": node.freshness_policy is not None,
        }
    return {
        "assets": assets,
        "jobs": sorted({j.name for j in definitions.jobs or []}),
        "schedules": {
            s.name: definitions.resolve_schedule_def(s.name).cron_schedule
            for s in definitions.schedules or []
        },
        "sensors": sorted(s.name for s in definitions.sensors or []),
    }


def test_definitions_match_snapshot(definitions):
    current = graph_snapshot(definitions)
    if os.environ.get("UPDATE_SNAPSHOTS") == "1" or not SNAPSHOT.exists():
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")
    assert current == json.loads(SNAPSHOT.read_text()), (
        "asset graph changed; see the module docstring to update"
    )
