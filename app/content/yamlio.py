"""Reading YAML 1.2 with ruamel.yaml, keeping line numbers to point at problems."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError


def format_loc(loc: Sequence[str | int]) -> str:
    """('steps', 3, 'id') -> 'steps[3].id'"""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


# --- YAML -------------------------------------------------------------------------------------


class YamlProblem(Exception):
    def __init__(self, line: int | None, message: str, field: str = "") -> None:
        super().__init__(message)
        self.line = line
        self.message = message
        self.field = field


_KEY_LINE = re.compile(r"^(?P<indent> *)(?P<dash>- +)?(?P<key>[A-Za-z0-9_][\w-]*) *:(?: |$)")


def _item_index(lines: list[str], row: int, column: int) -> int:
    """How many sequence items at `column` come before the one on `row`."""
    count = 0
    for raw in reversed(lines[:row]):
        stripped = raw.lstrip(" ")
        if not stripped.strip() or stripped.startswith("#"):
            continue
        indent = len(raw) - len(stripped)
        if indent < column:
            break
        if indent == column and (stripped.startswith("- ") or stripped.rstrip() == "-"):
            count += 1
    return count


def field_at_line(text: str, line: int) -> str:
    """Best guess of the field path at a line of a file that does not parse (e.g. steps[1].body).

    A syntax error leaves no tree to look in, so this reads the indentation of block-style YAML.
    """
    lines = text.splitlines()
    parts: list[str | int] = []
    limit: int | None = None  # an enclosing key sits left of this column
    for row in range(min(line, len(lines)) - 1, -1, -1):
        match = _KEY_LINE.match(lines[row])
        if match is None:
            continue
        indent = len(match["indent"])
        key_column = indent + len(match["dash"] or "")
        if limit is None:
            parts.insert(0, match["key"])
        elif match["dash"] and indent < limit:
            pass  # the sequence item that holds the field found so far
        elif key_column < limit:
            parts.insert(0, match["key"])
        else:
            continue
        if match["dash"]:
            parts.insert(0, _item_index(lines, row, indent))
            limit = indent
        else:
            limit = key_column
        if limit == 0:
            break
    return format_loc(parts)


def read_yaml(file: Path) -> Any:
    """The round-trip tree of a YAML 1.2 file (keeps line numbers); raises YamlProblem."""
    yaml = YAML(typ="rt")
    yaml.version = (1, 2)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise YamlProblem(None, f"cannot be read: {exc}") from exc
    try:
        return yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        what = ", ".join(part for part in (exc.context, exc.problem) if part)
        raise YamlProblem(
            line,
            f"is not valid YAML: {what or exc}",
            field_at_line(text, line) if line else "",
        ) from exc
    except YAMLError as exc:
        raise YamlProblem(None, f"is not valid YAML: {exc}") from exc


def to_plain(node: Any) -> Any:
    """ruamel's commented containers and scalar subclasses -> plain Python values."""
    if isinstance(node, dict):
        return {(str(k) if isinstance(k, str) else k): to_plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [to_plain(v) for v in node]
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, str):
        return str(node)
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    return node


def line_of(tree: Any, loc: Sequence[str | int]) -> int:
    """The 1-based line of the deepest part of `loc` present in the tree (1 if none is)."""
    line = 1
    node = tree
    for part in loc:
        if isinstance(node, CommentedMap) and part in node:
            line = node.lc.key(part)[0] + 1
            node = node[part]
        elif isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node):
            line = node.lc.item(part)[0] + 1
            node = node[part]
        else:
            break
    return line
