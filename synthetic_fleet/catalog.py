"""Hardware and model catalogs: data files a user can extend with their own machines and models."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CATALOG_DIR = Path(__file__).resolve().parent / "catalog"
PLACEMENTS = ("gpu_hbm", "system_memory", "remote_ps", "hybrid")

PLATFORM_FIELDS = (
    "sockets",
    "cores",
    "cpu_fp32_tflops",
    "dram_gb",
    "dram_bw_gb_per_s",
    "gpus",
    "hbm_gb_per_gpu",
    "hbm_bw_gb_per_s_per_gpu",
    "gpu_fp32_tflops",
    "gpu_link_gb_per_s",
    "pcie_gb_per_s",
    "nic_gb_per_s",
    "idle_w",
    "peak_w",
)
# Observed platforms (e.g. from public traces) may know only some figures; the rest are null and such a
# platform is not modelled (no placements, no predictions) until a user fills them in.
REQUIRED_PLATFORM_FIELDS = ("gpus",)
MODEL_FIELDS = (
    "n_dense_features",
    "n_sparse_features",
    "n_tables",
    "embedding_dim",
    "embedding_gb",
    "mean_lookups_per_table",
    "bottom_mlp",
    "top_mlp",
    "interaction",
    "batch_size",
)


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
    placements: tuple[str, ...] = ()
    source: str = "catalog"

    @property
    def hbm_gb(self) -> float:
        return self.gpus * (self.hbm_gb_per_gpu or 0)

    @property
    def modelled(self) -> bool:
        """Every figure the workload model needs is known."""
        return bool(self.placements) and all(getattr(self, f) is not None for f in PLATFORM_FIELDS)


@dataclass(frozen=True)
class HardwareCatalog:
    platforms: Mapping[str, Platform]
    hbm_reserve: float
    dram_reserve: float
    remote_ps_platform: str
    remote_ps_max_servers: int

    def platform(self, name: str) -> Platform:
        try:
            return self.platforms[name]
        except KeyError:
            raise CatalogError(
                f"unknown platform {name!r}; known: {', '.join(sorted(self.platforms))}"
            ) from None

    @property
    def ps_server_gb(self) -> float:
        """Usable DRAM of one remote parameter server."""
        return self.platform(self.remote_ps_platform).dram_gb * (1 - self.dram_reserve)

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

    def workload(self, platform: str) -> dict[str, Any]:
        """The workload columns of a run of this model on ``platform`` (its default batch there)."""
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
            "batch_size": int(self.batch_size.get(platform, max(self.batch_size.values()))),
        }


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise CatalogError(f"{path}: expected a mapping at the top level")
    return data


def _platform(name: str, spec: Mapping[str, Any], path: Path) -> Platform:
    unknown = set(spec) - set(PLATFORM_FIELDS) - {"description", "placements", "source"}
    if unknown:
        raise CatalogError(
            f"{path}: platform {name!r} has unknown fields {sorted(unknown)}; valid: {list(PLATFORM_FIELDS)}"
        )
    missing = [f for f in REQUIRED_PLATFORM_FIELDS if f not in spec]
    if missing:
        raise CatalogError(f"{path}: platform {name!r} lacks {missing}")
    placements = tuple(spec.get("placements") or ())
    bad = [p for p in placements if p not in PLACEMENTS]
    if bad:
        raise CatalogError(
            f"{path}: platform {name!r} has unknown placements {bad}; valid: {list(PLACEMENTS)}"
        )
    for f in PLATFORM_FIELDS:
        v = spec.get(f)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0):
            raise CatalogError(
                f"{path}: platform {name!r} field {f} must be a non-negative number, got {v!r}"
            )
    if spec["gpus"] == 0 and any(p in ("gpu_hbm", "hybrid") for p in placements):
        raise CatalogError(f"{path}: platform {name!r} has no GPUs but allows a GPU placement")
    p = Platform(
        name=name,
        description=spec.get("description", ""),
        placements=placements,
        source=spec.get("source", "catalog"),
        **{f: spec.get(f) for f in PLATFORM_FIELDS},
    )
    if placements and not p.modelled:
        lacking = [f for f in PLATFORM_FIELDS if spec.get(f) is None]
        raise CatalogError(f"{path}: platform {name!r} lists placements but lacks {lacking} the model needs")
    return p


def load_hardware(extra: Path | None = None) -> HardwareCatalog:
    """The built-in hardware catalog, extended (same key replaces) by ``extra`` if it exists."""
    base_path = CATALOG_DIR / "hardware.yaml"
    base = _read_yaml(base_path)
    platforms = {k: _platform(k, v, base_path) for k, v in base["platforms"].items()}
    if extra is not None and extra.exists():
        user = _read_yaml(extra)
        platforms.update({k: _platform(k, v, extra) for k, v in (user.get("platforms") or {}).items()})
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
    )


def register_platforms(catalog_file: Path, platforms: Mapping[str, Mapping[str, Any]]) -> None:
    """Add or replace platforms in a user catalog file (YAML, written atomically); other entries are kept."""
    import os

    data = _read_yaml(catalog_file) if catalog_file.exists() else {}
    merged = dict(data.get("platforms") or {})
    for name, spec in platforms.items():
        _platform(name, spec, catalog_file)  # validate before writing
        merged[name] = {k: v for k, v in spec.items() if v is not None}
    data["platforms"] = dict(sorted(merged.items()))
    catalog_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = catalog_file.with_name(f".{catalog_file.name}.tmp")
    tmp.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    os.replace(tmp, catalog_file)


def load_models(extra: Path | None = None) -> dict[str, ModelSpec]:
    """The built-in model catalog, extended by ``extra`` if it exists."""
    specs: dict[str, ModelSpec] = {}
    for path in [CATALOG_DIR / "models.yaml"] + ([extra] if extra is not None and extra.exists() else []):
        for name, spec in (_read_yaml(path).get("models") or {}).items():
            missing = [f for f in MODEL_FIELDS if f not in spec]
            if missing:
                raise CatalogError(f"{path}: model {name!r} lacks {missing}")
            specs[name] = ModelSpec(
                name=name,
                description=spec.get("description", ""),
                lookup_power_law_alpha=float(spec.get("lookup_power_law_alpha", 1.2)),
                share=float(spec.get("share", 0.0)),
                cpu_baseline=spec.get("cpu_baseline"),
                **{f: spec[f] for f in MODEL_FIELDS},
            )
    return specs
