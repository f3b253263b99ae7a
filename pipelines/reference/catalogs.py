"""reference/catalogs.md: the fields of the hardware catalog and of the Prometheus mapping (from their
documentation in schemas/catalog/, as their loaders read it) and of a model catalog entry (from the loader's
list of accepted fields and the runs contract, where the workload fields are documented)."""

from __future__ import annotations

from typing import Any

from pipelines.lib.ingest.prometheus import mapping
from pipelines.reference.md import cell, code, page, prose, table
from workload_model import catalog, fields

INTRO = """\
Three catalogs a team may extend in its data home: the hardware catalog (`<data home>/catalog/hardware.yaml`,
platforms), the model catalog (`<data home>/catalog/models.yaml`, model families) and the Prometheus
mapping (`<data home>/catalog/prometheus.yaml`). A user entry replaces the built-in one of the same name;
a field that is not listed here, a value of the wrong type or outside its bounds is an error naming the
field (exit 2). Generated from `schemas/catalog/` and the catalogs' loaders when the site is built
(`pipelines/reference/catalogs.py`)."""


def shown(value: Any) -> str:
    """A default or an allowed value as the YAML file would give it."""
    if value is None:
        return code("null")
    if value == "":
        return code('""')
    if isinstance(value, bool):
        return code(str(value).lower())
    if isinstance(value, dict):
        return ", ".join(f"{code(k)}: {code(v)}" for k, v in value.items()) or code("{}")
    if isinstance(value, list | tuple):
        return ", ".join(code(v) for v in value) or code("[]")
    return code(value)


def _number(v: float) -> str:
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:g}"


def allowed(spec: dict[str, Any]) -> str:
    """Bounds, allowed values and pattern of one field, as one cell."""
    out = []
    lo, hi = spec.get("min"), spec.get("max")
    if lo is not None and hi is not None:
        out.append(f"{_number(lo)} .. {_number(hi)}")
    elif lo is not None:
        out.append(f">= {_number(lo)}")
    elif hi is not None:
        out.append(f"<= {_number(hi)}")
    if spec.get("enum"):
        out.append("one of " + shown(spec["enum"]))
    if spec.get("pattern"):
        out.append(f"matches {code(spec['pattern'])}")
    return cell("; ".join(out))


def hardware() -> str:
    schema = catalog.hardware_schema()
    uses = "\n".join(f"- {code(k)}: {prose(v)}" for k, v in schema["model_uses"].items())
    rows = [
        [
            code(name),
            spec["type"],
            cell(spec.get("unit", "")),
            allowed(spec),
            code(spec["model"]),
            shown(spec["default"]) if "default" in spec else "",
            cell(spec["description"]),
        ]
        for name, spec in catalog.hardware_fields().items()
    ]
    header = ("field", "type", "unit", "values", "model", "default", "description")
    return "\n\n".join(
        [
            "## Hardware catalog",
            prose(schema["description"]),
            "Each platform is a mapping of these fields; its `model` use says:",
            uses,
            table(header, rows),
        ]
    )


def prometheus() -> str:
    rows = [
        [
            code(name),
            cell(spec["type"]),
            cell(spec.get("unit", "")),
            allowed(spec),
            shown(spec.get("default")),
            cell(spec["description"]),
        ]
        for name, spec in mapping.fields().items()
    ]
    header = ("field", "type", "unit", "values", "default", "description")
    return "\n\n".join(["## Prometheus mapping", prose(mapping.schema()["description"]), table(header, rows)])


def _model_row(name: str, required: bool, default: Any) -> list[str]:
    spec = catalog.MODEL_ENTRY_EXTRAS[name] if name in catalog.MODEL_ENTRY_EXTRAS else fields.spec(name)
    description = spec["description"]
    if name in catalog.MODEL_ENTRY_SHAPES:
        description += " In a model entry: " + catalog.MODEL_ENTRY_SHAPES[name]
    return [
        code(name),
        "yes" if required else "no",
        spec["type"],
        cell(spec.get("unit", "")),
        allowed(spec),
        "" if required else shown(default),
        cell(description),
    ]


def models() -> str:
    required, optional = catalog.model_entry_fields()
    defaults = catalog.model_entry_defaults()
    rows = [_model_row(f, True, None) for f in required] + [
        _model_row(f, False, defaults[f]) for f in optional
    ]
    header = ("field", "required", "type", "unit", "values", "default", "description")
    text = (
        "Each model family is a mapping of these fields under `models:`, named by its key (the runs' "
        "`model_name`). The workload fields are the runs contract's (see [`runs`](tables.md#runs)); a "
        "software field left null (precision, optimizer, kernels) is the platform's, from its `stack`."
    )
    return "\n\n".join(["## Model catalog", text, table(header, rows)])


def markdown() -> str:
    return page("Catalogs", INTRO, hardware(), models(), prometheus())
