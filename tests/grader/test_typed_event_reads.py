"""Checks (and the grader around them) read trace events only as the typed records of
`grader.events`, so a renamed or misspelt field fails mypy instead of a learner (issue 9).

A static scan of `grader/*.py`, `grader/checks/`, `grader/launch/` and `grader/inside/` (the
harness, which writes the records, is left out) finds every raw read: the removed raw accessors
(`of`, `first`, `in_attempt`, `RunView.events`), the raw `RankView.events` list read outside the
view itself, and a record's `kind` read from a dict outside the parser."""

from __future__ import annotations

import ast
from pathlib import Path

from grader.checks.base import RankView, RunView

GRADER = Path(__file__).resolve().parents[2] / "grader"
RAW_ACCESSORS = {"of", "first", "in_attempt", "events"}
# The view owns the raw list; the parser reads `kind` to choose the record's class; the wire
# types carry a rank's records across the sandbox boundary, and the host hands them to the view.
OWNERS = {
    "checks/base.py": "events",
    "events.py": "kind",
    "launch/wire.py": "events",
    "launch/host.py": "events",
}


def raw_reads(source: str, owns: str | None = None) -> list[str]:
    """Every raw event read in `source`, as "line N: what"; `owns` is what the module may read
    ("events": the raw list, "kind": a record's kind)."""
    found: list[tuple[int, int, str]] = []
    tree = ast.parse(source)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        at = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = node.func.attr
            if name in RAW_ACCESSORS:
                found.append((*at, f".{name}(...)"))
            elif name == "get" and node.args and _is_kind(node.args[0]) and owns != "kind":
                found.append((*at, ".get('kind')"))
        elif isinstance(node, ast.Attribute) and node.attr == "events" and owns != "events":
            raw_list = id(node) not in called and not _module_name(node.value)
            if isinstance(node.ctx, ast.Load) and raw_list:
                found.append((*at, ".events"))
        elif (
            isinstance(node, ast.Subscript)
            and _is_kind(node.slice)
            and owns != "kind"
            and isinstance(node.ctx, ast.Load)
        ):
            found.append((*at, "['kind']"))
    return [f"line {line}: {what}" for line, _, what in sorted(found)]


def _is_kind(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value == "kind"


def _module_name(node: ast.expr) -> bool:
    """`grader.events` in an expression is the module, not a view's list."""
    return isinstance(node, ast.Name) and node.id == "grader"


def _modules() -> list[Path]:
    paths = sorted(GRADER.glob("*.py"))
    for package in ("checks", "launch", "inside"):
        paths += sorted((GRADER / package).glob("*.py"))
    return paths


def test_no_check_or_grader_module_reads_trace_events_raw() -> None:
    modules = _modules()
    assert {"ddp.py", "elastic.py", "zero.py", "supervisor.py", "inspect_ckpt.py"} <= {
        p.name for p in modules
    }
    found = {}
    for path in modules:
        owns = OWNERS.get(str(path.relative_to(GRADER)))
        reads = raw_reads(path.read_text("utf-8"), owns)
        if reads:
            found[str(path.relative_to(GRADER))] = reads
    assert not found, f"raw trace-event reads (use RankView.typed / RunView.typed): {found}"


def test_the_scan_finds_each_kind_of_raw_read() -> None:
    source = """
steps = rank.of("step")
replay = rank.first("replay")
faults = run.events("fault")
late = rank.in_attempt(1, "step")
mine = [e for e in rank.events if e.get("kind") == "save"]
kind = record["kind"]
typed = rank.typed(Step)
module = grader.events
"""
    assert [read.split(": ", 1)[1] for read in raw_reads(source)] == [
        ".of(...)",
        ".first(...)",
        ".events(...)",
        ".in_attempt(...)",
        ".events",
        ".get('kind')",
        "['kind']",
    ]
    assert raw_reads("mine = [e for e in self.events]", owns="events") == []


def test_the_views_offer_no_raw_accessor() -> None:
    for name in ("of", "first", "in_attempt"):
        assert not hasattr(RankView, name), name
    assert not callable(getattr(RunView, "events", None))


# -- the hand-overs across process boundaries (grader.launch.wire) ----------------------------

# What a wire payload is called where it is read: the supervisor's config, the report, the
# harness settings, a frame, a node's spec, the spare hand-over message.
WIRE_NAMES = {"cfg", "config", "report", "settings", "spec", "frame", "message", "handover"}
# Raw payloads still read (none: the exec helper's spec and the keeper's orders are the
# dataclasses of the two standard-library scripts, `ExecSpec` and `Order`). An entry that no
# longer reads raw fails the test below, so the list only shrinks.
PENDING: dict[str, str] = {}


def raw_wire_reads(source: str) -> list[str]:
    """Every `name[...]` or `name.get(...)` read of a wire payload's name in `source`."""
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(ast.parse(source)):
        at = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            name = _terminal(node.value)
            if name in WIRE_NAMES:
                found.append((*at, f"{name}[...]"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = _terminal(node.func.value)
            if node.func.attr == "get" and name in WIRE_NAMES:
                found.append((*at, f"{name}.get(...)"))
    return [f"line {line}: {what}" for line, _, what in sorted(found)]


def _terminal(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def test_no_grader_module_reads_a_wire_payload_raw() -> None:
    found, pending = {}, {}
    for path in sorted(GRADER.rglob("*.py")):
        name = str(path.relative_to(GRADER))
        if name == "launch/wire.py":  # the types themselves parse the JSON
            continue
        reads = raw_wire_reads(path.read_text("utf-8"))
        if name in PENDING:
            pending[name] = reads
        elif reads:
            found[name] = reads
    assert not found, f"raw reads of a wire payload (use grader.launch.wire's types): {found}"
    stale = [name for name, reads in pending.items() if not reads]
    assert not stale, f"no raw read left: take these off PENDING: {stale}"
    assert set(pending) == set(PENDING), "a PENDING module was moved or removed"


def test_the_wire_scan_finds_each_kind_of_raw_read() -> None:
    source = """
world = int(cfg["world_size"])
nonce = self.cfg.get("nonce")
timeout = tracer.settings.get("pg_timeout_seconds", 30)
error = report.get("launch_error")
typed = cfg.world_size
other = steps[-1]
"""
    assert [read.split(": ", 1)[1] for read in raw_wire_reads(source)] == [
        "cfg[...]",
        "cfg.get(...)",
        "settings.get(...)",
        "report.get(...)",
    ]
