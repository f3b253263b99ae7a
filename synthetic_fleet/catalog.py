"""Hardware and model catalogs: data files a user can extend with their own machines and models."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

CATALOG_DIR = Path(__file__).resolve().parent / "catalog"
PLACEMENTS = ("gpu_hbm", "system_memory", "remote_ps", "hybrid")

PLATFORM_FIELDS = (
    "sockets", "cores", "cpu_fp32_tflops", "dram_gb", "dram_bw_gb_per_s", "gpus", "hbm_gb_per_gpu",
    "hbm_bw_gb_per_s_per_gpu", "gpu_fp32_tflops", "gpu_link_gb_per_s", "pcie_gb_per_s", "nic_gb_per_s",
    "idle_w", "peak_w",
)
MODEL_FIELDS = (
    "n_dense_features", "n_sparse_features", "n_tables", "embedding_dim", "embedding_gb",
    "mean_lookups_per_table", "bottom_mlp", "top_mlp", "interaction", "batch_size",
)


class CatalogError(ValueError):
    """A catalog file is malformed."""


@dataclass(frozen=True)
class Platform:
    """One hardware platform (a server type)."""

    name: str
    description: str
    sockets: int
    cores: int
    cpu_fp32_tflops: float
    dram_gb: float
    dram_bw_gb_per_s: float
    gpus: int
    hbm_gb_per_gpu: float
    hbm_bw_gb_per_s_per_gpu: float
    gpu_fp32_tflops: float
    gpu_link_gb_per_s: float
    pcie_gb_per_s: float
    nic_gb_per_s: float
    idle_w: float
    peak_w: float
    placements: tuple[str, ...]

    @property
    def hbm_gb(self) -> float:
        return self.gpus * self.hbm_gb_per_gpu


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
            raise CatalogError(f"unknown platform {name!r}; known: {', '.join(sorted(self.platforms))}") from None

    @property
    def ps_server_gb(self) -> float:
        """Usable DRAM of one remote parameter server."""
        return self.platform(self.remote_ps_platform).dram_gb * (1 - self.dram_reserve)

    def options(self) -> list[tuple[str, str]]:
        """Every (platform, placement) the catalog allows."""
        return [(p.name, pl) for p in self.platforms.values() for pl in p.placements]


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


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise CatalogError(f"{path}: expected a mapping at the top level")
    return data


def _platform(name: str, spec: Mapping[str, Any], path: Path) -> Platform:
    missing = [f for f in PLATFORM_FIELDS + ("placements",) if f not in spec]
    if missing:
        raise CatalogError(f"{path}: platform {name!r} lacks {missing}")
    bad = [p for p in spec["placements"] if p not in PLACEMENTS]
    if bad:
        raise CatalogError(f"{path}: platform {name!r} has unknown placements {bad}; valid: {list(PLACEMENTS)}")
    for f in PLATFORM_FIELDS:
        if not isinstance(spec[f], (int, float)) or spec[f] < 0:
            raise CatalogError(f"{path}: platform {name!r} field {f} must be a non-negative number, got {spec[f]!r}")
    if spec["gpus"] == 0 and any(p in ("gpu_hbm", "hybrid") for p in spec["placements"]):
        raise CatalogError(f"{path}: platform {name!r} has no GPUs but allows a GPU placement")
    return Platform(name=name, description=spec.get("description", ""), placements=tuple(spec["placements"]),
                    **{f: spec[f] for f in PLATFORM_FIELDS})


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
        raise CatalogError(f"{base_path}: remote_ps.server_platform {ps['server_platform']!r} is not a platform")
    return HardwareCatalog(platforms=platforms, hbm_reserve=float(reserve["hbm"]), dram_reserve=float(reserve["dram"]),
                           remote_ps_platform=ps["server_platform"], remote_ps_max_servers=int(ps["max_servers"]))


def load_models(extra: Path | None = None) -> dict[str, ModelSpec]:
    """The built-in model catalog, extended by ``extra`` if it exists."""
    specs: dict[str, ModelSpec] = {}
    for path in [CATALOG_DIR / "models.yaml"] + ([extra] if extra is not None and extra.exists() else []):
        for name, spec in (_read_yaml(path).get("models") or {}).items():
            missing = [f for f in MODEL_FIELDS if f not in spec]
            if missing:
                raise CatalogError(f"{path}: model {name!r} lacks {missing}")
            specs[name] = ModelSpec(
                name=name, description=spec.get("description", ""),
                lookup_power_law_alpha=float(spec.get("lookup_power_law_alpha", 1.2)),
                share=float(spec.get("share", 0.0)),
                **{f: spec[f] for f in MODEL_FIELDS},
            )
    return specs
