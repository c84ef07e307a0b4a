"""docs/architecture.md stays true to the code, and the import rules hold:

- every module under app/ and grader/ is named in docs/architecture.md. The rule: the page
  contains the module's path relative to its top package (`coach/evidence.py`, `main.py`),
  alone or after `app/` / `grader/`; a package's `__init__.py` is named by its folder;
- app/ imports from grader/ only the modules the page's boundary line lists (stated there once);
- grader/ imports nothing from app/;
- app/ has no import cycle, counting imports inside functions too.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from app.config import REPO_ROOT

DOC = REPO_ROOT / "docs" / "architecture.md"
BOUNDARY = re.compile(r"^\*\*The app/grader boundary\.\*\*(?P<line>.*)$", re.M)


def modules(top: str) -> dict[str, Path]:
    """Dotted name -> file of every module under `top` (a package is its __init__.py)."""
    found = {}
    for path in sorted((REPO_ROOT / top).rglob("*.py")):
        parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imported(path: Path, name: str) -> Iterator[str]:
    """Every module name `path` (module `name`) imports, at module level or in a function."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([node.module] if node.module else [])])
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def owner(name: str, known: dict[str, Path]) -> str | None:
    """The module `name` refers to (`app.db.utcnow` -> `app.db`), if it is one of `known`."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def test_every_module_is_named_in_architecture_md() -> None:
    doc = DOC.read_text("utf-8")
    unnamed = []
    for top in ("app", "grader"):
        for path in modules(top).values():
            relative = path.relative_to(REPO_ROOT / top).as_posix()
            if path.name == "__init__.py":  # a package: named by its folder
                relative = relative.removesuffix("__init__.py")
                if not relative:
                    continue
            pattern = rf"(?<![\w/])(?:{top}/)?{re.escape(relative)}(?![\w])"
            if not re.search(pattern, doc):
                unnamed.append(f"{top}/{relative}")
    assert unnamed == [], f"name these in docs/architecture.md ({DOC}): {unnamed}"


def boundary() -> set[str]:
    found = BOUNDARY.search(DOC.read_text("utf-8"))
    assert found is not None, "docs/architecture.md states the app/grader boundary in one line"
    return set(re.findall(r"`(grader\.[\w.]+)`", found["line"]))


def test_app_imports_only_the_grader_modules_the_boundary_names() -> None:
    allowed = boundary()
    grader = modules("grader")
    used: dict[str, set[str]] = {}
    for name, path in modules("app").items():
        for target in imported(path, name):
            if target == "grader" or target.startswith("grader."):
                module = owner(target, grader)
                if module is not None and module != "grader":
                    used.setdefault(module, set()).add(name)
    assert set(used) <= allowed, {m: sorted(by) for m, by in used.items() if m not in allowed}
    unused = sorted(allowed - set(used))
    assert unused == [], f"the boundary line names modules app/ no longer imports: {unused}"


def test_grader_imports_nothing_from_app() -> None:
    for name, path in modules("grader").items():
        wrong = [t for t in imported(path, name) if t == "app" or t.startswith("app.")]
        assert wrong == [], (name, wrong)


def test_app_has_no_import_cycle() -> None:
    known = modules("app")
    graph = {
        name: {
            target
            for imported_name in imported(path, name)
            if (target := owner(imported_name, known)) is not None
            and target != name
            and target != "app"
        }
        for name, path in known.items()
    }
    cycles = strongly_connected(graph)
    assert cycles == [], f"import cycles in app/: {cycles}"


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The cycles of `graph`: its strongly connected components of more than one module
    (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            advanced = False
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                    advanced = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


# The composition root wires the analytics consumer to the domain events; nothing else may.
ANALYTICS_WIRED_BY = {"app.main"}


def test_no_domain_imports_analytics() -> None:
    """The domains (learning, submissions, drafts, accounts, content, coach, ...) record what
    happened as domain events (app/domain_events) and know nothing of analytics, which reads
    their rows and consumes their events: no module outside app.analytics imports it, at module
    level or in a function, but the composition root."""
    known = modules("app")
    found = []
    for name, path in known.items():
        if (
            name == "app.analytics"
            or name.startswith("app.analytics.")
            or name in ANALYTICS_WIRED_BY
        ):
            continue
        for target in imported(path, name):
            if target == "app.analytics" or target.startswith("app.analytics."):
                found.append(f"{name} imports {target}")
    assert found == []
