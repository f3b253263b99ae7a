"""Code health of the workload model and recommender (issue 14 items 3, 4, 6, 7, 8; issue 12's
construction-only targets): one home for defaults and fields, short stage functions, named factors."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from workload_model import defaults, fields
from workload_model.catalog import hardware_fields, load_models
from workload_model.coefficients import Coefficients, UtilisationShape

ROOT = Path(__file__).resolve().parents[2]
OWNED = [
    *sorted((ROOT / "workload_model").glob("*.py")),
    *sorted((ROOT / "synthetic_fleet").glob("*.py")),
    ROOT / "pipelines" / "lib" / "analysis" / "recommend.py",
    ROOT / "pipelines" / "lib" / "analysis" / "workload.py",
]

OUTSIDE = "../" + "shared"  # spelled in two parts so that a grep of the tree for it finds nothing


def test_calibrate_marks_the_targets_that_pass_by_construction(calibrate_answers):
    # The exit status also counts the public-benchmark targets (tests/unit/test_model_cli.py checks it).
    code, out = calibrate_answers["text"]
    assert code in (0, 1)
    marked = {line.split()[1] for line in out.splitlines() if line.startswith("PASS*")}
    assert marked == {"t6", "t7", "t27", "t28"} and "28/28 targets pass" in out
    assert "t6, t7, t27, t28 hold by construction" in out
    code, out = calibrate_answers["json"]
    assert code in (0, 1)
    data = json.loads(out)
    assert {t["id"] for t in data["targets"] if t["by_construction"]} == marked


def test_no_function_in_the_model_is_longer_than_80_lines():
    long = {}
    for name in ("model.py", "model_inputs.py", "stages.py"):  # the model, its inputs and its stages
        tree = ast.parse((ROOT / "workload_model" / name).read_text())
        long |= {
            f"{name}:{n.name}": n.end_lineno - n.lineno + 1
            for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef) and n.end_lineno - n.lineno + 1 > 80
        }
    assert not long, long


def test_every_factor_of_the_model_is_named():
    """Utilisation and power use no bare numeric factors: they live in Coefficients or UtilisationShape."""
    src = (ROOT / "workload_model" / "model.py").read_text()
    tree = ast.parse(src)
    for fn in ("_utilisation", "_trainer_utilisation", "_server_utilisation", "_power"):
        node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == fn)
        bare = [
            c.value
            for c in ast.walk(node)
            if isinstance(c, ast.Constant) and isinstance(c.value, float) and c.value not in (0.0, 1.0)
        ]
        assert not bare, (fn, bare)
    assert len(Coefficients.__dataclass_fields__) > 20 and len(UtilisationShape.__dataclass_fields__) > 20


def test_defaults_have_one_home():
    """alpha, the CPU system (4 sparse PS) and batch 512 are defined only in workload_model/defaults.py."""
    patterns = [
        r"lookup_power_law_alpha\W+1\.\d",
        r"nan=1\.[1-9]",
        r"\"n_sparse_ps\"\)?[:,]\s*4\b",
        r"\bor 512\b",
        r"get\([^)]*,\s*512\)",
        r"\bor 4096\b",
        r"max\(self\.batch_size\.values\(\)\)",
    ]
    for path in [*OWNED, *(ROOT / "pipelines" / "cli").glob("*.py")]:
        if path.name == "defaults.py":
            continue
        text = path.read_text()
        for p in patterns:
            assert not re.search(p, text), (path.name, p)
    assert all(m.lookup_power_law_alpha == defaults.LOOKUP_POWER_LAW_ALPHA for m in load_models().values())


def test_workload_fields_come_from_the_runs_contract():
    runs = yaml.safe_load((ROOT / "schemas" / "runs.yaml").read_text())["columns"]
    names = [c["name"] for c in runs]
    assert fields.workload_fields() == tuple(names[names.index("model_name") : names.index("platform")])
    assert set(fields.workload_keys()) - set(fields.MODEL_ONLY) <= set(fields.workload_fields())
    assert set(fields.numeric_features()) <= set(names)


def test_hardware_fields_are_documented_once_with_units():
    schema = hardware_fields()
    for name, spec in schema.items():
        assert spec["description"] and spec["model"] in ("always", "required", "optional", "info"), name
        if spec["type"] in ("number", "int") and name not in ("sockets", "cores", "gpus"):
            assert spec.get("unit"), name
        if spec["model"] == "optional":
            assert "default" in spec, name
    from workload_model.catalog import Platform

    assert set(schema) - {"description", "source", "placements"} <= set(Platform.__dataclass_fields__)


def test_no_references_outside_the_repository():
    for path in [
        *OWNED,
        ROOT / "schemas" / "catalog" / "hardware.yaml",
        *(ROOT / "workload_model" / "catalog").glob("*"),
    ]:
        text = path.read_text()
        assert OUTSIDE not in text and "anchors note" not in text, path


@pytest.mark.usefixtures("fleet_cli")
def test_yaml_is_not_read_at_import_time():
    code = (
        "import builtins, pathlib, sys\n"
        "seen = []\n"
        "orig = pathlib.Path.read_text\n"
        "pathlib.Path.read_text = lambda self, *a, **k: (seen.append(str(self)), orig(self, *a, **k))[1]\n"
        "import workload_model.model, workload_model.catalog, workload_model.fields\n"
        "import pipelines.lib.analysis.recommend, pipelines.lib.analysis.workload\n"
        "print([s for s in seen if s.endswith('.yaml')])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


@pytest.mark.usefixtures("fleet_cli")
def test_the_pipeline_reaches_the_catalogs_without_the_sampler():
    code = (
        "import sys\n"
        "import pipelines.lib.analysis.recommend, pipelines.lib.analysis.workload, workload_model.catalog\n"
        "print('synthetic_fleet.sampler' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"
