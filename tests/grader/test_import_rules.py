"""The grader's import structure, from its source (every import, at module level or inside a
function): no cycle; the sandbox boundary crossed only through `grader.launch.wire`; nothing from
the app."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GRADER = ROOT / "grader"

# What runs in the sandbox may import, besides its own package.
INSIDE_MAY_IMPORT = ("grader.launch.wire", "grader.harness", "grader.events")
# Cycles known and being broken (none left): an entry that is gone fails the test below.
PENDING_CYCLES: list[set[str]] = []


def modules(root: Path = GRADER) -> dict[str, Path]:
    """Dotted name -> file, for every module of the package at `root`."""
    found = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path) -> set[str]:
    """Every name `name` imports (absolute, resolved from relative imports), anywhere in it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*up, base] if base else up)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def graph() -> dict[str, set[str]]:
    """grader module -> the grader modules it imports (a `from pkg import name` of a function
    counts as importing `pkg`)."""
    mods = modules()
    edges: dict[str, set[str]] = {}
    for name, path in mods.items():
        targets = set()
        for imported in imports(name, path):
            while imported and imported not in mods:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        edges[name] = targets
    return edges


def cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def _inside(name: str) -> bool:
    return name == "grader.inside" or name.startswith("grader.inside.")


def test_the_grader_has_no_import_cycle() -> None:
    found = cycles(graph())
    unexpected = [sorted(c) for c in found if c not in PENDING_CYCLES]
    assert not unexpected, f"import cycles in grader/: {unexpected}"
    gone = [sorted(c) for c in PENDING_CYCLES if c not in found]
    assert not gone, f"this cycle is gone: take it off PENDING_CYCLES: {gone}"


def _in_a_rank(name: str) -> bool:
    """The harness runs in every rank, in the sandbox too: a spare rank (grader.harness.spare)
    takes its rank through grader.inside.spares."""
    return name == "grader.harness" or name.startswith("grader.harness.")


def test_host_modules_never_import_what_runs_in_the_sandbox() -> None:
    found = {
        name: sorted(t for t in targets if _inside(t))
        for name, targets in graph().items()
        if not _inside(name) and not _in_a_rank(name)
    }
    assert not {k: v for k, v in found.items() if v}, found


def test_the_inside_imports_only_the_wire_the_harness_and_the_events() -> None:
    allowed = INSIDE_MAY_IMPORT
    found = {}
    for name, targets in graph().items():
        if not _inside(name):
            continue
        bad = [
            t
            for t in targets
            if not _inside(t) and not any(t == a or t.startswith(a + ".") for a in allowed)
        ]
        if bad:
            found[name] = sorted(bad)
    assert not found, f"grader.inside imports beyond grader.launch.wire/harness/events: {found}"
    assert "grader.launch.wire" in graph()["grader.inside.supervisor"]


def test_the_wire_imports_only_the_standard_library() -> None:
    path = GRADER / "launch" / "wire.py"
    top = {name.split(".")[0] for name in imports("grader.launch.wire", path) if name}
    assert top <= set(sys.stdlib_module_names) | {"__future__"}, top


def test_the_grader_imports_nothing_from_the_app() -> None:
    found = {
        name: sorted(i for i in imports(name, path) if i == "app" or i.startswith("app."))
        for name, path in modules().items()
    }
    assert not {k: v for k, v in found.items() if v}, found


def test_the_scan_sees_lazy_and_relative_imports_and_finds_a_cycle(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from pkg import b\n")
    (package / "b.py").write_text("from .a import f\n")
    (package / "c.py").write_text("import pkg.b\n")
    mods = modules(package)
    assert imports("pkg.a", mods["pkg.a"]) == {"pkg", "pkg.b"}
    assert imports("pkg.b", mods["pkg.b"]) == {"pkg.a", "pkg.a.f"}
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"b"}}) == [{"a", "b"}]
    assert cycles({"a": {"b"}, "b": set()}) == []
