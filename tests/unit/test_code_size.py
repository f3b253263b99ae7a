"""Rooms stay small (#41): no module over 600 lines, no class over 300, no function over 80 in pipelines/,
dashboards/, workload_model/ and synthetic_fleet/. The rooms still over a limit are listed with their size
today: they may shrink, and leave the list when they are under; none grows, and nothing new joins them."""

from __future__ import annotations

import ast

from pipelines.lib.paths import PROJECT_ROOT

PACKAGES = ("pipelines", "dashboards", "workload_model", "synthetic_fleet")
LIMITS = {"module": 600, "class": 300, "function": 80}
STILL_OVER: dict[str, int] = {}


def _sizes() -> dict[str, int]:
    """Every module, class and function of the packages over its limit, with its lines."""
    over = {}
    for package in PACKAGES:
        for path in sorted((PROJECT_ROOT / package).rglob("*.py")):
            src = path.read_text()
            rel = path.relative_to(PROJECT_ROOT).as_posix()
            if src.count("\n") > LIMITS["module"]:
                over[f"module {rel}"] = src.count("\n")
            for node in ast.walk(ast.parse(src)):
                kind = (
                    "class"
                    if isinstance(node, ast.ClassDef)
                    else "function"
                    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                    else None
                )
                if kind is not None and node.end_lineno - node.lineno + 1 > LIMITS[kind]:
                    over[f"{kind} {rel}:{node.name}"] = node.end_lineno - node.lineno + 1
    return over


def test_no_room_grows_past_its_limit():
    found = _sizes()
    new = {k: v for k, v in found.items() if k not in STILL_OVER}
    grown = {k: f"{STILL_OVER[k]} -> {v}" for k, v in found.items() if k in STILL_OVER and v > STILL_OVER[k]}
    assert not new, f"over the limits {LIMITS}: {new}; split them"
    assert not grown, f"grew: {grown}"


def test_the_list_of_rooms_still_over_is_current():
    found = _sizes()
    under = sorted(set(STILL_OVER) - set(found))
    shrunk = {k: f"{STILL_OVER[k]} -> {v}" for k, v in found.items() if k in STILL_OVER and v < STILL_OVER[k]}
    assert not under, f"under the limits now: take them out of STILL_OVER: {under}"
    assert not shrunk, f"smaller now: lower their sizes in STILL_OVER: {shrunk}"
