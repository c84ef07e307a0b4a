"""`ERROR_CODES` (the OpenAPI's and README's list of stable codes) is complete: every AppError
subclass and every code raised as `AppError("code", status, ...)` in app/ is listed, with the
status it comes with."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from collections.abc import Iterator

import app
from app.config import REPO_ROOT
from app.errors import ERROR_CODES, AppError


def subclasses(cls: type[AppError]) -> Iterator[type[AppError]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from subclasses(sub)


def raised_codes() -> Iterator[tuple[str, int, str]]:
    """(code, status, file:line) of every AppError("code", status, ...) written in app/."""
    for path in sorted((REPO_ROOT / "app").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "AppError"):
                continue
            args = node.args
            if len(args) >= 2 and all(isinstance(arg, ast.Constant) for arg in args[:2]):
                code, status = args[0].value, args[1].value  # type: ignore[attr-defined]
                yield str(code), int(status), f"{path.name}:{node.lineno}"


def test_every_app_error_code_is_listed_with_its_status() -> None:
    for module in pkgutil.walk_packages(app.__path__, "app."):
        importlib.import_module(module.name)
    found = {(cls.code, cls.status_code, cls.__qualname__) for cls in subclasses(AppError)}
    found |= set(raised_codes())
    assert len(found) > 15
    wrong = [
        (code, status, where)
        for code, status, where in sorted(found)
        if ERROR_CODES.get(code, (None,))[0] != status
    ]
    assert wrong == [], f"add these to ERROR_CODES in app/errors.py: {wrong}"
