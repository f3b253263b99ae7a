"""The safe YAML reader: plain documents load as yaml.safe_load would; bombs, tags, non-finite numbers and
oversized files are refused quickly with one line naming the place."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from pipelines.lib import safe_yaml
from pipelines.lib.safe_yaml import YamlLimitError, load_file, loads

HERE = Path("w.yaml")


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb: [1, 2.5, x]\nc: {d: null, e: true}\n",
        '{"json": [1, 2, {"too": "yes"}]}',
        "base: &b {x: 1}\nderived:\n  <<: *b\n  y: 2\n",  # a few anchors and merge keys are fine
        "",
    ],
)
def test_plain_documents_load_like_safe_load(text):
    assert loads(text, HERE) == yaml.safe_load(text)


def _refused(text: str) -> str:
    start = time.perf_counter()
    with pytest.raises(YamlLimitError) as exc:
        loads(text, HERE)
    assert time.perf_counter() - start < 2
    message = str(exc.value)
    assert "\n" not in message and len(message) < 300 and message.startswith("w.yaml")
    return message


def test_billion_laughs():
    levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'] + [
        f"{n}: &{n} [{','.join([f'*{p}'] * 9)}]" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
    ]
    assert "expands to more than" in _refused("\n".join(levels))


def test_too_many_aliases():
    text = "a: &a 1\nb: [" + ", ".join(["*a"] * (safe_yaml.MAX_ALIASES + 1)) + "]\n"
    assert "aliases" in _refused(text)


def test_self_reference():
    assert "refers to itself" in _refused("a: &a [*a]\n")


def test_deep_flow_nesting_is_refused_before_the_scanner_slows_down():
    assert "nested deeper than" in _refused("[" * 100_000)


@pytest.mark.parametrize(
    "text", ["x: !!python/object/apply:os.system [true]\n", "x: !!python/name:os.system\n", "x: !custom 1\n"]
)
def test_tags_beyond_plain_values(text):
    assert "is not allowed" in _refused(text)


@pytest.mark.parametrize("value", [".inf", "-.Inf", ".NaN"])
def test_non_finite_numbers(value):
    assert "is not a finite number" in _refused(f"x: {value}\n")


def test_syntax_error_names_line_and_column():
    assert _refused("a: [1, 2\n").startswith("w.yaml:2:1:")


def test_oversized_file_is_refused_without_reading(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("x: 1\n" + "#" * safe_yaml.MAX_BYTES)
    with pytest.raises(YamlLimitError, match="at most"):
        load_file(path)


def test_non_utf8_file(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"x: \xe9\n")
    with pytest.raises(YamlLimitError, match="not UTF-8"):
        load_file(path)
