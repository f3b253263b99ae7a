"""The Prometheus mapping: which labels name a run and a role, where a node's platform and capacities come
from, which metrics hold each resource. Every field is documented, with its default, in
schemas/catalog/prometheus.yaml; a team's file (<data home>/catalog/prometheus.yaml) changes what differs
and is validated against it."""

from __future__ import annotations

import re
from collections.abc import Mapping as MappingType
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from pipelines.lib import paths, safe_yaml
from pipelines.lib.contracts import contract

MAPPING_FILE = "prometheus.yaml"  # in <data home>/catalog/


class MappingError(ValueError):
    """A mapping file is malformed; the message names the key and what is expected."""


@cache
def schema() -> dict[str, Any]:
    """schemas/catalog/prometheus.yaml: its description and the fields."""
    return yaml.safe_load((paths.SCHEMAS_DIR / "catalog" / "prometheus.yaml").read_text(encoding="utf-8"))


@cache
def fields() -> dict[str, dict[str, Any]]:
    """Field name -> its entry in schemas/catalog/prometheus.yaml (type, default, bounds, description)."""
    return {f["name"]: f for f in schema()["fields"]}


def ksm_label(key: str) -> str:
    """A Kubernetes label key as kube-state-metrics names it on kube_pod_labels / kube_node_labels:
    label_ + the key with every character other than a letter, digit or _ replaced by _, in snake case."""
    name = re.sub(r"[^a-zA-Z0-9_]", "_", key)
    return "label_" + re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


@dataclass(frozen=True)
class PromMapping:
    """The effective mapping: the defaults with a team's changes."""

    interval_s: int
    max_gap_s: float
    stale_after_s: float
    clip_tolerance: float
    max_run_hours: float
    run_id: str
    job_labels: tuple[str, ...]
    role_labels: tuple[str, ...]
    roles: dict[str, str]
    ignore_roles: tuple[str, ...]
    model_labels: tuple[str, ...]
    status_without_phase: str
    node_labels: tuple[str, ...]
    platform_label: str
    platforms: dict[str, str]
    default_platform: str | None
    nic_exclude: str
    nic_bytes_per_s: float | None
    dram_bytes_per_s: float | None
    metrics: dict[str, str]

    def json_paths(self, keys: tuple[str, ...]) -> list[str]:
        """JSON paths into a sample's labels for ``keys`` (pod labels as kube-state-metrics names them)."""
        return [f'$."{ksm_label(k)}"' for k in keys]


def _check(name: str, value: Any, where: str, platforms: frozenset[str] | None) -> Any:
    spec = fields()[name]
    kind = spec["type"]
    if value is None and kind.endswith("or null"):
        return None
    base = kind.removesuffix(" or null")
    bad = f"{where}: {name} must be "
    if base in ("int", "number"):
        number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
        lo, hi = spec.get("min", float("-inf")), spec.get("max", float("inf"))
        if number is None or not (base == "number" or float(number).is_integer()) or not lo <= number <= hi:
            unit = f" {spec['unit']}" if spec.get("unit") else ""
            raise MappingError(
                f"{bad}a {'whole ' if base == 'int' else ''}number in [{lo:g}, {hi:g}]{unit}, got {value!r}"
            )
        return int(number) if base == "int" else float(number)
    if base == "text":
        if not isinstance(value, str) or not value:
            raise MappingError(f"{bad}text, got {value!r}")
        if spec.get("enum") and value not in spec["enum"]:
            raise MappingError(f"{bad}one of {', '.join(spec['enum'])}, got {value!r}")
        if name == "default_platform" and platforms is not None and value not in platforms:
            raise MappingError(
                f"{bad}a hardware catalog platform ({', '.join(sorted(platforms))}), got {value!r}"
            )
        if name == "nic_exclude":
            try:
                re.compile(value)
            except re.error as exc:
                raise MappingError(f"{bad}a regular expression ({exc})") from None
        if name == "run_id" and not {"{job}"} <= set(re.findall(r"\{[a-z]+\}", value)) <= {
            "{job}",
            "{namespace}",
        }:
            raise MappingError(f"{bad}a template with {{job}} (and optionally {{namespace}}), got {value!r}")
        return value
    if base == "list":
        if not isinstance(value, list) or not all(isinstance(x, str) and x for x in value):
            raise MappingError(f"{bad}a list of texts, got {value!r}")
        return tuple(value)
    if base == "map":
        if not isinstance(value, MappingType) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise MappingError(f"{bad}a mapping of texts to texts, got {value!r}")
        return dict(value)
    raise MappingError(f"schemas/catalog/prometheus.yaml: {name} has an unknown type {kind!r}")


def build(
    data: MappingType[str, Any] | None, where: str, platforms: frozenset[str] | None = None
) -> PromMapping:
    """The mapping from a team's changes (``data``), validated; ``platforms``: the hardware catalog's."""
    data = dict(data or {})
    unknown = sorted(set(data) - set(fields()))
    if unknown:
        raise MappingError(f"{where}: unknown keys {unknown}; known: {', '.join(fields())}")
    values = {}
    for name, spec in fields().items():
        values[name] = _check(name, data[name] if name in data else spec.get("default"), where, platforms)
    metrics = dict(fields()["metrics"]["default"])
    extra = sorted(set(values["metrics"]) - set(metrics))
    if extra:
        raise MappingError(f"{where}: metrics has unknown keys {extra}; known: {', '.join(metrics)}")
    values["metrics"] = {**metrics, **values["metrics"]}
    roles = contract("utilisation_samples").column("role").enum or ()
    wrong = {k: v for k, v in values["roles"].items() if v not in roles}
    if wrong:
        raise MappingError(f"{where}: roles maps to {wrong}; a role is one of {', '.join(roles)}")
    values["roles"] = {k.lower(): v for k, v in values["roles"].items()}
    values["ignore_roles"] = tuple(r.lower() for r in values["ignore_roles"])
    if platforms is not None:
        wrong = {k: v for k, v in values["platforms"].items() if v not in platforms}
        if wrong:
            raise MappingError(
                f"{where}: platforms maps to {wrong}, not in the hardware catalog "
                f"({', '.join(sorted(platforms))})"
            )
    return PromMapping(**values)


def user_file(home: paths.DataHome) -> Path:
    return home.user_catalog_dir / MAPPING_FILE


def load_mapping(home: paths.DataHome, platforms: frozenset[str] | None = None) -> PromMapping:
    """The data home's mapping (its catalog/prometheus.yaml over the defaults), validated."""
    path = user_file(home)
    if not path.exists():
        return build(None, "the default mapping", platforms)
    try:
        data = safe_yaml.load_file(path)
    except safe_yaml.YamlLimitError as exc:
        raise MappingError(str(exc)) from None
    if data is not None and not isinstance(data, MappingType):
        raise MappingError(f"{path}: expected a mapping of keys at the top level")
    return build(data, str(path), platforms)
