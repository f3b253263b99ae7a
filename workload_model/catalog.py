"""Hardware and model catalogs: data files a user can extend with their own machines and models.

Every hardware field, its unit, default and what the workload model uses it for is documented once, in
schemas/catalog/hardware.yaml; this module derives the platform fields and their validation from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from workload_model import defaults

CATALOG_DIR = Path(__file__).resolve().parent / "catalog"
HARDWARE_SCHEMA = Path(__file__).resolve().parents[1] / "schemas" / "catalog" / "hardware.yaml"
PLACEMENTS = ("gpu_hbm", "system_memory", "remote_ps", "hybrid")
# Figures only a GPU platform needs; a CPU platform (gpus: 0) may leave them out (they are 0).
GPU_FIELDS = ("hbm_gb_per_gpu", "hbm_bw_gb_per_s_per_gpu", "gpu_fp32_tflops", "gpu_link_gb_per_s")


@cache
def hardware_schema() -> dict[str, Any]:
    """schemas/catalog/hardware.yaml: its description, what each ``model`` use means, and the fields."""
    return yaml.safe_load(HARDWARE_SCHEMA.read_text(encoding="utf-8"))


@cache
def hardware_fields() -> dict[str, dict[str, Any]]:
    """Field name -> its entry in schemas/catalog/hardware.yaml (type, min, unit, model use, default)."""
    return {f["name"]: f for f in hardware_schema()["fields"]}


def needed_fields() -> tuple[str, ...]:
    """Figures the workload model needs: a platform with placements must give them all."""
    return tuple(k for k, f in hardware_fields().items() if f["model"] in ("required", "always"))


def optional_fields() -> dict[str, Any]:
    """Figures with a default: a value, or the name of the field whose value it copies."""
    return {k: f["default"] for k, f in hardware_fields().items() if f["model"] == "optional"}


class CatalogError(ValueError):
    """A catalog file is malformed."""


@dataclass(frozen=True)
class Platform:
    """One hardware platform (a server type)."""

    name: str
    description: str
    gpus: int
    sockets: int | None = None
    cores: int | None = None
    cpu_fp32_tflops: float | None = None
    dram_gb: float | None = None
    dram_bw_gb_per_s: float | None = None
    hbm_gb_per_gpu: float | None = None
    hbm_bw_gb_per_s_per_gpu: float | None = None
    gpu_fp32_tflops: float | None = None
    gpu_link_gb_per_s: float | None = None
    pcie_gb_per_s: float | None = None
    nic_gb_per_s: float | None = None
    idle_w: float | None = None
    peak_w: float | None = None
    cpu_fp16_tflops: float | None = None
    gpu_tf32_tflops: float | None = None
    gpu_fp16_tflops: float | None = None
    host_pooling: bool = False
    cpu_matrix_tflops: float = 0.0
    stack: str = "current"
    pcie_gen: int = 0
    pcie_lanes_per_gpu: int = 16
    gpu_peers: str = "host"
    pcie_switches: int = 0
    pcie_uplink_gb_per_s: float | None = None
    nics: int = 1
    gpudirect_rdma: bool = False
    local_storage_gb_per_s: float = 0.0
    input_from: str = "network"
    placements: tuple[str, ...] = ()
    source: str = "catalog"

    @property
    def hbm_gb(self) -> float:
        return self.gpus * (self.hbm_gb_per_gpu or 0)

    @property
    def modelled(self) -> bool:
        """Every figure the workload model needs is known."""
        return bool(self.placements) and all(getattr(self, f) is not None for f in needed_fields())


@dataclass(frozen=True)
class PsServer:
    """The remote parameter server's figures the model reads, every one known."""

    name: str
    dram_gb: float
    dram_bw_gb_per_s: float
    nic_gb_per_s: float
    idle_w: float
    peak_w: float


@dataclass(frozen=True)
class HardwareCatalog:
    platforms: Mapping[str, Platform]
    hbm_reserve: float
    dram_reserve: float
    remote_ps_platform: str
    remote_ps_max_servers: int
    invalid: Mapping[str, str] = field(default_factory=dict)  # user entry -> why it was left out

    def platform(self, name: str) -> Platform:
        if name in self.invalid:
            raise CatalogError(self.invalid[name])
        try:
            return self.platforms[name]
        except KeyError:
            raise CatalogError(
                f"unknown platform {name!r}; known: {', '.join(sorted(self.platforms))}"
            ) from None

    def ps_server(self) -> PsServer:
        """The remote parameter server's platform; CatalogError names a figure it lacks."""
        p = self.platform(self.remote_ps_platform)
        figures = {
            f: getattr(p, f) for f in ("dram_gb", "dram_bw_gb_per_s", "nic_gb_per_s", "idle_w", "peak_w")
        }
        lacking = sorted(f for f, v in figures.items() if v is None)
        if lacking:
            raise CatalogError(f"remote_ps.server_platform {p.name!r} lacks {lacking} the model needs")
        return PsServer(name=p.name, **figures)

    @property
    def ps_server_gb(self) -> float:
        """Usable DRAM of one remote parameter server."""
        return self.ps_server().dram_gb * (1 - self.dram_reserve)

    def options(self) -> list[tuple[str, str]]:
        """Every (platform, placement) the catalog allows (modelled platforms only)."""
        return [(p.name, pl) for p in self.platforms.values() if p.modelled for pl in p.placements]


@dataclass(frozen=True)
class ModelSpec:
    """A model family of the catalog."""

    name: str
    description: str
    n_dense_features: int
    n_sparse_features: int
    n_tables: int
    embedding_dim: int
    embedding_gb: float
    mean_lookups_per_table: float
    lookup_power_law_alpha: float
    bottom_mlp: str
    top_mlp: str
    interaction: str
    batch_size: Mapping[str, int]
    share: float
    cpu_baseline: Mapping[str, int] | None = None
    # The software stack; None = not stated: the platform's (workload_model/stack.py).
    precision: str | None = None
    optimizer: str | None = None
    kernels: str | None = None
    dcn_layers: int = defaults.DCN_LAYERS
    dcn_rank: int = defaults.DCN_RANK
    kernels_on: Mapping[str, str] | None = None  # platform -> kernel mode where its runs used another

    def workload(self, platform: str, gpus: int | None = None) -> dict[str, Any]:
        """The workload columns of a run of this model on ``platform``: its batch there, or the default of
        the platform kind (``gpus`` per server; needed when the batch map does not name the platform)."""
        if gpus is None and platform not in self.batch_size:
            raise CatalogError(f"model {self.name!r} names no batch for {platform!r}; give its GPU count")
        return {
            "model_name": self.name,
            "n_dense_features": self.n_dense_features,
            "n_sparse_features": self.n_sparse_features,
            "n_tables": self.n_tables,
            "embedding_dim": self.embedding_dim,
            "embedding_gb": self.embedding_gb,
            "mean_lookups_per_table": self.mean_lookups_per_table,
            "lookup_power_law_alpha": self.lookup_power_law_alpha,
            "bottom_mlp": self.bottom_mlp,
            "top_mlp": self.top_mlp,
            "interaction": self.interaction,
            "precision": self.precision,
            "optimizer": self.optimizer,
            "kernels": (self.kernels_on or {}).get(platform, self.kernels),
            "dcn_layers": self.dcn_layers,
            "dcn_rank": self.dcn_rank,
            "batch_size": defaults.batch_for(dict(self.batch_size), platform, gpus or 0),
        }


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise CatalogError(f"{path}: expected a mapping at the top level")
    return data


def _check_name(kind: str, name: Any, path: Path) -> None:
    """Catalog entries are named by text (YAML reads 123 as a number and ~ as nothing)."""
    if not isinstance(name, str) or not name.strip():
        fix = "give it a name" if name is None else f'quote it ("{name}")'
        shown = "~ (nothing)" if name is None else repr(name)
        raise CatalogError(f"{path}: a {kind} named {shown}: names are text; {fix}")


def _check_field(name: str, field: str, v: Any, path: Path) -> None:
    """A CatalogError naming the field and its bound unless ``v`` is valid for it."""
    spec = hardware_fields()[field]
    where = f"{path}: platform {name!r} field {field}"
    unit = f" {spec['unit']}" if spec.get("unit") not in (None, "count") else ""
    if spec["type"] in ("number", "int"):
        low, high = spec.get("min", 0), spec.get("max", float("inf"))
        ok = not isinstance(v, bool) and isinstance(v, (int, float)) and low <= v <= high
        if ok and spec["type"] == "int":
            ok = float(v).is_integer()
        if not ok:
            kind = "whole number" if spec["type"] == "int" else "number"
            sign = "non-negative " if low == 0 else ""
            bounds = f">= {low}" + (f" and <= {high:g}" if high != float("inf") else "")
            hint = " (YAML reads 1e9 as text: write 1.0e9)" if isinstance(v, str) else ""
            raise CatalogError(f"{where} must be a {sign}{kind} ({bounds}{unit}), got {v!r}{hint}")
    elif spec["type"] == "bool" and not isinstance(v, bool):
        raise CatalogError(f"{where} must be true or false, got {v!r}")
    elif spec["type"] == "string" and not isinstance(v, str):
        raise CatalogError(f"{where} must be text, got {v!r}")
    elif spec["type"] == "string" and "enum" in spec and v not in spec["enum"]:
        raise CatalogError(f"{where} must be one of {', '.join(spec['enum'])}, got {v!r}")
    elif spec["type"] == "list":
        bad = [x for x in (v if isinstance(v, list) else [v]) if x not in spec["enum"]]
        if bad or not isinstance(v, list):
            raise CatalogError(f"{where} has unknown values {bad}; valid: {spec['enum']}")


def _platform(name: str, spec: Mapping[str, Any], path: Path) -> Platform:
    """One platform entry, validated against schemas/catalog/hardware.yaml; optional fields get defaults."""
    _check_name("platform", name, path)
    if not isinstance(spec, Mapping):
        raise CatalogError(f"{path}: platform {name!r} must be a mapping of fields")
    unknown = sorted(set(spec) - set(hardware_fields()))
    if unknown:
        raise CatalogError(
            f"{path}: platform {name!r} has unknown fields {unknown}; valid: {sorted(hardware_fields())}"
        )
    if spec.get("gpus") is None:
        raise CatalogError(f"{path}: platform {name!r} field gpus is required (0 for a CPU platform)")
    for f, v in spec.items():
        if v is not None:
            _check_field(name, f, v, path)
    placements = tuple(spec.get("placements") or ())
    if spec["gpus"] == 0 and any(p in ("gpu_hbm", "hybrid") for p in placements):
        raise CatalogError(
            f"{path}: platform {name!r} field placements: gpu_hbm and hybrid need gpus > 0 (gpus is 0)"
        )
    if spec["gpus"] == 0:  # a CPU platform need not describe GPUs
        spec = {**dict.fromkeys(GPU_FIELDS, 0), **{k: v for k, v in spec.items() if v is not None}}
    spec = _derived(spec)
    lacking = [f for f in needed_fields() if spec.get(f) is None]
    if placements and lacking:
        raise CatalogError(f"{path}: platform {name!r} lists placements but lacks {lacking} the model needs")
    values: dict[str, Any] = {
        f: spec.get(f) for f in (*needed_fields(), "sockets", "cores", "nics") if spec.get(f) is not None
    }
    for f, default in optional_fields().items():
        v = spec.get(f)
        if v is None and f == "idle_w":
            v = defaults.IDLE_SHARE * spec["peak_w"] if spec.get("peak_w") is not None else None
        values[f] = v if v is not None else _default(f, default, spec)
    return Platform(
        name=name,
        description=spec.get("description", ""),
        placements=placements,
        source=spec.get("source", "catalog"),
        **values,
    )


def _default(name: str, default: Any, spec: Mapping[str, Any]) -> Any:
    """An optional field's default: the value of the field it names, its literal value, or None where it
    is a rule (_derived applies those) that had nothing to derive from."""
    schema = hardware_fields()
    if isinstance(default, str) and default in schema:
        return spec.get(default)
    if isinstance(default, str) and default not in schema[name].get("enum", ()):
        return None
    return default


# GB/s per lane and direction of each PCIe generation (after line encoding; Gen6 after FLIT overhead).
PCIE_LANE_GB_PER_S = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def _derived(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults that follow from other fields: the PCIe rate from generation and lanes, GPU peers over
    their links where the server has GPU links (else staged through the host), input from local drives
    where it has them."""
    out = dict(spec)
    if out.get("pcie_gb_per_s") is None and out.get("pcie_gen"):
        lanes = out.get("pcie_lanes_per_gpu") or hardware_fields()["pcie_lanes_per_gpu"]["default"]
        out["pcie_gb_per_s"] = round(PCIE_LANE_GB_PER_S[int(out["pcie_gen"])] * lanes, 3)
    if out.get("gpu_peers") is None:
        out["gpu_peers"] = "links" if (out.get("gpu_link_gb_per_s") or 0) > 0 else "host"
    if out.get("input_from") is None:
        out["input_from"] = "local_storage" if (out.get("local_storage_gb_per_s") or 0) > 0 else "network"
    return out


def _entries(
    specs: Mapping[str, Any], parse: Any, path: Path, lenient: bool
) -> tuple[dict[str, Any], dict[str, str]]:
    """Every entry of a catalog file parsed; with ``lenient``, an invalid entry is left out and its error
    kept (name -> message) so the others stay usable, otherwise its error is raised."""
    good, bad = {}, {}
    for name, spec in specs.items():
        try:
            good[name] = parse(name, spec, path)
        except CatalogError as exc:
            if not lenient:
                raise
            bad[name] = str(exc)
    return good, bad


def load_hardware(extra: Path | None = None, lenient: bool = False) -> HardwareCatalog:
    """The built-in hardware catalog, extended (same key replaces) by ``extra`` if it exists. With
    ``lenient``, an invalid entry of ``extra`` is left out (and replaces no built-in platform) and listed in
    ``invalid`` with its error; asking for it raises that error."""
    base_path = CATALOG_DIR / "hardware.yaml"
    base = _read_yaml(base_path)
    platforms = {k: _platform(k, v, base_path) for k, v in base["platforms"].items()}
    invalid: dict[str, str] = {}
    if extra is not None and extra.exists():
        user, invalid = _entries(_read_yaml(extra).get("platforms") or {}, _platform, extra, lenient)
        platforms = {k: v for k, v in platforms.items() if k not in invalid} | user
    reserve = base["reserve"]
    ps = base["remote_ps"]
    if ps["server_platform"] not in platforms:
        raise CatalogError(
            f"{base_path}: remote_ps.server_platform {ps['server_platform']!r} is not a platform"
        )
    return HardwareCatalog(
        platforms=platforms,
        hbm_reserve=float(reserve["hbm"]),
        dram_reserve=float(reserve["dram"]),
        remote_ps_platform=ps["server_platform"],
        remote_ps_max_servers=int(ps["max_servers"]),
        invalid=invalid,
    )


def with_platforms(catalog_file: Path, platforms: Mapping[str, Mapping[str, Any]]) -> str:
    """The text of a user catalog file (YAML) with ``platforms`` added or replaced, each validated; its
    other entries are kept. The caller writes it (atomically)."""
    data = _read_yaml(catalog_file) if catalog_file.exists() else {}
    merged = dict(data.get("platforms") or {})
    for name, spec in platforms.items():
        _platform(name, spec, catalog_file)
        merged[name] = {k: v for k, v in spec.items() if v is not None}
    data["platforms"] = dict(sorted(merged.items()))
    return yaml.safe_dump(data, sort_keys=False)


# The fields of a model entry that are neither workload fields (runs contract) nor model-only ones
# (workload_model/fields.py), each as those document theirs.
MODEL_ENTRY_EXTRAS: dict[str, dict[str, str]] = {
    "description": {"type": "string", "description": "What the model is."},
    "share": {
        "type": "float64",
        "description": "Its weight among the synthetic fleet's runs, relative to the other models'; a model "
        "with share 0 (left out) is drawn only when no model has a share.",
    },
    "cpu_baseline": {
        "type": "map",
        "description": "Server counts of its runs on a CPU platform (n_trainers, n_sparse_ps, n_dense_ps, "
        "n_readers; those left out: workload_model/defaults.py CPU_SYSTEM), the production CPU setup the "
        "calibration compares one GPU server with.",
    },
}
# Where a model entry's value takes another shape than the workload field of the same name.
MODEL_ENTRY_SHAPES: dict[str, str] = {
    "batch_size": "A map platform -> batch; a platform it does not name gets its kind's default "
    "(workload_model/defaults.py batch_for).",
    "kernels": "One mode, or a map platform -> mode (with an optional `default`) where the software the "
    "model ran with differs by platform.",
}


def model_entry_fields() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The fields a model entry must give (the runs contract's workload fields but the model name, which is
    the entry's key, and the lookup exponent) and those it may."""
    from workload_model import fields

    required = tuple(f for f in fields.workload_fields()[1:] if f != "lookup_power_law_alpha")
    return required, ("lookup_power_law_alpha", *fields.MODEL_ONLY, *MODEL_ENTRY_EXTRAS)


def model_entry_defaults() -> dict[str, Any]:
    """What each optional field of a model entry is when left out: the first built-in model loaded without
    them (the loader's answer, not a second list)."""
    path = CATALOG_DIR / "models.yaml"
    required, optional = model_entry_fields()
    name, spec = next(iter(_read_yaml(path)["models"].items()))
    bare = _model(name, {k: v for k, v in spec.items() if k in required}, path)
    return {f: getattr(bare, f) for f in optional}


def _model(name: str, spec: Any, path: Path) -> ModelSpec:
    """One model entry, every field checked against its bounds (workload_model/fields.py)."""
    from workload_model import fields

    _check_name("model", name, path)
    if not isinstance(spec, Mapping):
        raise CatalogError(f"{path}: model {name!r} must be a mapping of fields")
    model_fields, accepted = model_entry_fields()
    optional = ("lookup_power_law_alpha", *fields.MODEL_ONLY)
    unknown = sorted(set(spec) - set(model_fields) - set(accepted))
    missing = [f for f in model_fields if f not in spec]
    if unknown or missing:
        raise CatalogError(
            f"{path}: model {name!r} " + (f"lacks {missing}" if missing else f"has unknown fields {unknown}")
        )
    batch = spec["batch_size"]
    if not isinstance(batch, Mapping) or not batch:
        raise CatalogError(f"{path}: model {name!r} field batch_size must map platforms to batches")
    try:
        checked = {f: fields.check(f, spec[f]) for f in model_fields if f != "batch_size"}
        checked["batch_size"] = {p: fields.check("batch_size", b) for p, b in batch.items()}
        # kernels: one mode, or a map platform -> mode (with an optional `default`) where the software a
        # model ran with differs by platform (e.g. the MLPerf submissions).
        kernels = spec.get("kernels")
        per_platform = dict(kernels) if isinstance(kernels, Mapping) else {}
        kernels_on = {p: fields.check("kernels", k) for p, k in per_platform.items() if p != "default"}
        given = {**spec, "kernels": per_platform.get("default")} if per_platform else spec
        opt = {f: fields.check(f, given[f]) for f in optional if given.get(f) is not None}
        baseline = spec.get("cpu_baseline")
        if baseline is not None:
            baseline = {k: fields.check(k, v) for k, v in dict(baseline).items()}
    except fields.FieldError as exc:
        raise CatalogError(f"{path}: model {name!r}: {exc}") from None
    return ModelSpec(
        name=name,
        description=spec.get("description", ""),
        lookup_power_law_alpha=opt.pop("lookup_power_law_alpha", defaults.LOOKUP_POWER_LAW_ALPHA),
        **opt,
        share=float(spec.get("share", 0.0)),
        cpu_baseline=baseline,
        kernels_on=kernels_on or None,
        **checked,
    )


class ModelCatalog(dict[str, ModelSpec]):
    """Model name -> ModelSpec, and ``invalid``: user entries left out (name -> why)."""

    def __init__(self, specs: Mapping[str, ModelSpec], invalid: Mapping[str, str]) -> None:
        super().__init__(specs)
        self.invalid = dict(invalid)


def load_models(extra: Path | None = None, lenient: bool = False) -> ModelCatalog:
    """The built-in model catalog, extended (same name replaces) by ``extra`` if it exists; ``lenient`` as
    for load_hardware."""
    base_path = CATALOG_DIR / "models.yaml"
    specs = {name: _model(name, spec, base_path) for name, spec in _read_yaml(base_path)["models"].items()}
    invalid: dict[str, str] = {}
    if extra is not None and extra.exists():
        user, invalid = _entries(_read_yaml(extra).get("models") or {}, _model, extra, lenient)
        specs = {k: v for k, v in specs.items() if k not in invalid} | user
    return ModelCatalog(specs, invalid)
