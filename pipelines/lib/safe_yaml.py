"""YAML (and JSON) files written by users, read with limits: a small file cannot expand into gigabytes.

A plain ``yaml.safe_load`` builds anchors and aliases into shared objects, so a 538-byte "billion laughs"
document is cheap to load but explodes as soon as anything walks or prints it. Here the node graph is
composed first and measured as if every alias were expanded; documents above the limits, with tags
other than YAML's plain types, or with non-finite numbers are refused with a one-line reason.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

MAX_BYTES = 1_000_000
MAX_ALIASES = 100
MAX_NODES = 100_000  # scalars, sequences and mappings once every alias is expanded
MAX_DEPTH = 50

_PLAIN_TAGS = {
    f"tag:yaml.org,2002:{t}"
    for t in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp", "merge")
}


class YamlLimitError(ValueError):
    """A document that is not plain, small, finite YAML; the message is one line naming where and why."""


def _where(path: Path, mark: yaml.Mark | None) -> str:
    return f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)


class _FiniteLoader(yaml.SafeLoader):
    """SafeLoader that refuses ``.inf`` and ``.nan``: no configuration field means infinity."""

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        value = super().construct_yaml_float(node)
        if not math.isfinite(value):
            raise yaml.constructor.ConstructorError(
                None, None, f"{node.value!r} is not a finite number", node.start_mark
            )
        return value


_FiniteLoader.add_constructor("tag:yaml.org,2002:float", _FiniteLoader.construct_yaml_float)


def _measure(root: yaml.Node, path: Path) -> None:
    """Refuse foreign tags, deep nesting, cycles, and more than MAX_NODES nodes after alias expansion."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node, depth: int) -> int:
        if node.tag not in _PLAIN_TAGS:
            raise YamlLimitError(
                f"{_where(path, node.start_mark)}: tag {node.tag!r} is not allowed; write plain values"
            )
        if depth > MAX_DEPTH:
            raise YamlLimitError(f"{_where(path, node.start_mark)}: nested deeper than {MAX_DEPTH} levels")
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise YamlLimitError(f"{_where(path, node.start_mark)}: an alias refers to itself")
        open_nodes.add(key)
        if isinstance(node, yaml.SequenceNode):
            n = 1 + sum(size(child, depth + 1) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            n = 1 + sum(size(k, depth + 1) + size(v, depth + 1) for k, v in node.value)
        else:
            n = 1
        open_nodes.discard(key)
        if n > MAX_NODES:
            raise YamlLimitError(
                f"{_where(path, node.start_mark)}: expands to more than {MAX_NODES:,} values "
                "(anchors and aliases multiply); write the values out"
            )
        sizes[key] = n
        return n

    size(root, 0)


def _scan(text: str, path: Path) -> None:
    """Count aliases and flow nesting on the token stream, before PyYAML's scanner slows down quadratically
    with nesting (5,000 ``[`` take seconds)."""
    aliases = depth = 0
    for token in yaml.scan(text, Loader=yaml.SafeLoader):
        if isinstance(token, yaml.AliasToken):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise YamlLimitError(
                    f"{_where(path, token.start_mark)}: more than {MAX_ALIASES} aliases; write the values out"
                )
        elif isinstance(token, yaml.FlowSequenceStartToken | yaml.FlowMappingStartToken):
            depth += 1
            if depth > MAX_DEPTH:
                raise YamlLimitError(
                    f"{_where(path, token.start_mark)}: nested deeper than {MAX_DEPTH} levels"
                )
        elif isinstance(token, yaml.FlowSequenceEndToken | yaml.FlowMappingEndToken):
            depth -= 1


def loads(text: str, path: Path) -> Any:
    """The document in ``text`` (read from ``path``, named in errors), within the limits above."""
    try:
        _scan(text, path)
        loader = _FiniteLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _measure(node, path)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        problem = " ".join(str(exc.problem or exc.context or "not valid YAML").split())
        raise YamlLimitError(f"{_where(path, exc.problem_mark)}: {problem}") from None
    except yaml.YAMLError as exc:
        raise YamlLimitError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise YamlLimitError(f"{path}: nested too deeply") from None


def load_file(path: Path) -> Any:
    """The YAML or JSON document in ``path``; refuses files over MAX_BYTES before reading them."""
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise YamlLimitError(f"{path}: {size:,} bytes; a configuration file is at most {MAX_BYTES:,} bytes")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise YamlLimitError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return loads(text, path)
