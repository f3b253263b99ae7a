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
# Their records (default, meaning) are pipelines.lib.settings.HOME and LAKE; named here, where they are read.
HOME_ENV = "FLEET_HOME"
LAKE_ENV = "FLEET_LAKE"


@dataclass(frozen=True)
class DataHome:
    """The data home: landing files, the staging area, the analyst catalog, reports, the Dagster
    instance (always a local folder), and the lake: by default the home's lake/ folder, or elsewhere
    (another folder, or ``s3://bucket/prefix``: see ``pipelines.lib.storage.lake``).

    ``root`` is always absolute, so views and reports never depend on the reader's working directory.
    """

    root: Path
    lake_uri: str = ""

    def __post_init__(self) -> None:
        if not self.lake_uri:
            object.__setattr__(self, "lake_uri", str(self.root / "lake"))

    @classmethod
    def resolve(cls, home: str | os.PathLike[str] | None = None, lake: str | None = None) -> DataHome:
        """``home``, else ``$FLEET_HOME``, else ``./data``, made absolute; the lake ``lake``, else
        ``$FLEET_LAKE``, else the home's lake/ folder."""
        raw = home if home not in (None, "") else os.environ.get(HOME_ENV) or DEFAULT_HOME
        root = Path(raw).expanduser().resolve()
        return cls(root, lake_uri(lake or os.environ.get(LAKE_ENV) or "", root))

    @property
    def remote_lake(self) -> bool:
        return self.lake_uri.startswith("s3://")

    @property
    def landing(self) -> Path:
        return self.root / "landing"

    @property
    def staging(self) -> Path:
        """Where a day is read before it is published into the lake (always local)."""
        return self.root / "staging"

    @property
    def step_outputs(self) -> Path:
        """What the steps of a run executed in other processes hand on (a split day's task files), per run:
        the IO manager's folder of runs on the workers."""
        return self.staging / "step_outputs"

    @property
    def partials_cache(self) -> Path:
        """Per-part aggregates of a split day's samples, left by its slices for the day's analyses."""
        return self.root / "cache" / "partials"

    @property
    def locks(self) -> Path:
        return self.root / "locks"

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


def lake_uri(text: str, root: Path) -> str:
    """The lake's URI: ``s3://bucket/prefix`` as given (no trailing slash), a local folder made absolute,
    or the home's lake/ folder when empty."""
    text = text.strip()
    if not text:
        return str(root / "lake")
    if text.startswith("s3://"):
        if len(text[5:].split("/", 1)[0]) < 3:
            raise ValueError(f"lake {text!r}: an s3:// lake needs a bucket name of 3 characters or more")
        return text.rstrip("/")
    if "://" in text:
        raise ValueError(f"lake {text!r}: a lake is a local folder or s3://bucket/prefix")
    return str(Path(text).expanduser().resolve())
