"""Where things live: the repository's folders and the data home."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SCHEMAS_DIR = PROJECT_ROOT / "schemas"
SQL_DIR = PROJECT_ROOT / "sql"
INSTANCE_TEMPLATE = PROJECT_ROOT / "dagster_home" / "dagster.yaml"

DEFAULT_HOME = "data"


@dataclass(frozen=True)
class DataHome:
    """The data home: landing files, the Parquet lake, the analyst catalog, reports, the Dagster instance.

    ``root`` is always absolute, so views and reports never depend on the reader's working directory.
    """

    root: Path

    @classmethod
    def resolve(cls, home: str | os.PathLike[str] | None = None) -> DataHome:
        """``home``, else ``$FLEET_HOME``, else ``./data``; made absolute."""
        raw = home if home not in (None, "") else os.environ.get("FLEET_HOME") or DEFAULT_HOME
        return cls(Path(raw).expanduser().resolve())

    @property
    def landing(self) -> Path:
        return self.root / "landing"

    @property
    def lake(self) -> Path:
        return self.root / "lake"

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse"

    @property
    def catalog_path(self) -> Path:
        """The analyst catalog: a DuckDB file of views only."""
        return self.warehouse / "fleet.duckdb"

    @property
    def reports(self) -> Path:
        return self.root / "reports"

    @property
    def report_path(self) -> Path:
        return self.reports / "fleet_report.html"

    @property
    def dagster_home(self) -> Path:
        return self.root / "dagster_home"

    @property
    def user_catalog_dir(self) -> Path:
        """Optional user extensions of the hardware and model catalogs (hardware.yaml, models.yaml)."""
        return self.root / "catalog"

    def table_dir(self, table: str) -> Path:
        return self.lake / table

    def partition_dir(self, table: str, day: str) -> Path:
        return self.lake / table / f"day={day}"
