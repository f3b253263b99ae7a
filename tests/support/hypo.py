"""Hypothesis sized by tier: the full suite runs every example a test asks for, `make test-fast` a fifth."""

from __future__ import annotations

import os

from hypothesis import settings

FAST = os.environ.get("FLEET_TEST_TIER") == "fast"
settings.register_profile("fast", max_examples=20, deadline=None)
if FAST:
    settings.load_profile("fast")


def examples(n: int) -> int:
    """``n`` examples in `make test`; a fifth of them (at least 10) in `make test-fast`."""
    return max(10, n // 5) if FAST else n
