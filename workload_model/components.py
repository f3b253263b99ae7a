"""The model's hardware terms against public component measurements (targets c1-c7).

Each check names a coefficient and the range that micro-benchmarks of that one component show
(workload_model/catalog/component_measurements.yaml, sources beside each figure); the coefficient must lie
within it. No end-to-end result informs these. ``python -m workload_model.components`` prints the table
docs/model-terms.md carries.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from workload_model.coefficients import DEFAULT, Coefficients

MEASUREMENTS = Path(__file__).resolve().parent / "catalog" / "component_measurements.yaml"


@dataclass(frozen=True)
class ComponentCheck:
    """One term, the value the model uses, the measured range and whether the value lies within it."""

    id: str
    coefficient: str
    term: str
    value: float
    low: float
    high: float
    measured: str

    @property
    def passed(self) -> bool:
        return self.low <= self.value <= self.high

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"passed": self.passed}


def evaluate(coef: Coefficients = DEFAULT) -> list[ComponentCheck]:
    """Every component check with ``coef``'s value."""
    checks = yaml.safe_load(MEASUREMENTS.read_text(encoding="utf-8"))["checks"]
    return [
        ComponentCheck(
            c["id"],
            c["coefficient"],
            c["term"],
            float(getattr(coef, c["coefficient"])),
            float(c["low"]),
            float(c["high"]),
            " ".join(c["measured"].split()),
        )
        for c in checks
    ]


def markdown(coef: Coefficients = DEFAULT) -> str:
    """The checks as a markdown table: term, coefficient and value, measured range, verdict, sources."""
    rows = [
        "| target | term | model | measured | holds | measurements (sources) |",
        "| --- | --- | ---: | ---: | --- | --- |",
    ]
    for c in evaluate(coef):
        verdict = "yes" if c.passed else "**no**"
        rows.append(
            f"| {c.id} | {c.term} | `{c.coefficient}` = {c.value:g} | {c.low:g}-{c.high:g} | {verdict} "
            f"| {c.measured} |"
        )
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
