"""Numbers out of polars aggregates, which polars types as any Python literal or None."""

from __future__ import annotations


def as_float(v: object) -> float:
    """A numeric aggregate (sum, min, max, mean, item) as a float; anything else is a bug, said here."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise TypeError(f"expected a number, got {v!r}")
    return float(v)


def as_int(v: object) -> int:
    """An integral aggregate (count, sum of integers, item) as an int."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"expected an integer, got {v!r}")
    return v
