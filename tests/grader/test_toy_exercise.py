"""An exercise added from files alone, as the README promises: a check module dropped into
`grader/checks/`, a hook module into `grader/harness/hooks/` and a lesson file with a `grading`
block; nothing else is edited. Two tiny programs are graded for real (sandbox "none", ranks under
torch's elastic launcher) and the toy check decides.

The files go into a copy of the `grader` package (first on the path of the grading process, its
supervisor and ranks), not into the tree the other test processes grade with at the same time: a
broken hook there would break their gradings."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import grader

HOOK = '''
"""Records every math.factorial call of the learner's program."""

import math
from typing import Any

from grader.harness.tracer import Tracer, wrap


def install(tracer: Tracer) -> None:
    def make(original: Any) -> Any:
        def factorial(n: Any) -> Any:
            tracer.emit("{name}", n=n, line=tracer.where())
            return original(n)

        return factorial

    wrap(math, "factorial", make)
'''

CHECK = '''
"""Every rank computes n! (the toy exercise of tests/grader/test_toy_exercise.py)."""

import dataclasses
from typing import Any

from grader.checks.base import Outcome, RunView, check, failed, passed, ranks_text
from grader.events import Event


@dataclasses.dataclass(frozen=True, kw_only=True)
class Factorial(Event):
    """The toy hook's record: a math.factorial call."""

    KIND = "{name}"
    n: int | None = None
    line: int | None = None


@check("{name}.factorial", title="Every rank computes n!", hint="Call math.factorial everywhere.")
def factorial(run: RunView, params: dict[str, Any]) -> Outcome:
    n = params.get("n", 5)
    missing = [r.rank for r in run.ranks if not any(e.n == n for e in r.typed(Factorial))]
    if missing:
        return failed(f"{{ranks_text(missing)}} never computed factorial({{n}}).", rank=missing[0])
    first = run.ranks[0].first_typed(Factorial)
    return passed(f"Every rank computed factorial({{n}}) {{run.where(first and first.line)}}.")
'''

LESSON = """
id: toy-lesson
exercises:
  - id: toy
    grading:
      checks: [run.completed, {name}.factorial]
      params: {{{name}.factorial: {{n: 6}}}}
      launch: {{world_sizes: [2]}}
      limits: {{wall_seconds: 60}}
"""

GRADE = """
import json, sys
from pathlib import Path
from grader.api import grade
from grader.contract import Job
from grader.exercises import load_spec

lessons, code = Path(sys.argv[1]), Path(sys.argv[2]).read_text()
job = Job(exercise="toy-lesson/toy", code=code, spec=load_spec("toy-lesson/toy", lessons),
          submission_id="toy")
# The supervisor (and the ranks it forks) import this copy of the grader too.
sys.executable = sys.argv[3]
print(grade(job, sandbox="none").model_dump_json())
"""
# The interpreter, with the copy of the grader first on its path.
PYTHON = """#!/bin/sh
PYTHONPATH={src} exec {python} "$@"
"""

EVERY_RANK = """
import math
print(math.factorial(6))
"""

RANK0_ONLY = """
import math, os
if os.environ["RANK"] == "0":
    print(math.factorial(6))
"""


BROKEN_HOOK = """
def install(tracer):
    raise RuntimeError("the toy hook is broken")
"""


@pytest.fixture
def toy(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The toy modules in a copy of the grader (under tmp_path/src) and a lessons dir."""
    name = f"toy_{secrets.token_hex(4)}"
    shutil.copytree(
        Path(grader.__path__[0]),
        tmp_path / "src" / "grader",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    lessons = tmp_path / "lessons"
    (lessons / "01-toy").mkdir(parents=True)
    (lessons / "01-toy" / "lesson.yaml").write_text(LESSON.format(name=name))
    with _modules(tmp_path, name, hook=HOOK.format(name=name), check=CHECK.format(name=name)):
        yield name, lessons


@contextlib.contextmanager
def _modules(tmp_path: Path, name: str, *, hook: str, check: str) -> Iterator[None]:
    copy = tmp_path / "src" / "grader"
    paths = {
        copy / "harness" / "hooks" / f"{name}.py": hook,
        copy / "checks" / f"{name}.py": check,
    }
    try:
        for path, text in paths.items():
            path.write_text(textwrap.dedent(text))
        yield
    finally:
        for path in paths:
            path.unlink(missing_ok=True)


def _grade(lessons: Path, code: str, tmp_path: Path) -> tuple[dict[str, Any], str]:
    """The Result of grading `code` (in a fresh process: the packages are discovered anew), and
    what that process logged."""
    program = tmp_path / "main.py"
    program.write_text(code)
    python = tmp_path / "bin" / "python"
    python.parent.mkdir(exist_ok=True)
    python.write_text(PYTHON.format(src=tmp_path / "src", python=sys.executable))
    python.chmod(0o755)
    proc = subprocess.run(
        [str(python), "-c", GRADE, str(lessons), str(program), str(python)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,  # not the repository: `-c` puts the cwd first on the path
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result, proc.stderr


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_toy_exercise_plugs_in_from_files_alone(toy: tuple[str, Path], tmp_path: Path) -> None:
    name, lessons = toy
    good, _ = _grade(lessons, EVERY_RANK, tmp_path)
    assert good["status"] == "pass", good
    assert [c["id"] for c in good["checks"]] == ["run.completed", f"{name}.factorial"]
    message = good["checks"][1]["message"]
    assert message == "Every rank computed factorial(6) at line 3 (`print(math.factorial(6))`)."
    bad, _ = _grade(lessons, RANK0_ONLY, tmp_path)
    assert bad["status"] == "fail", bad
    toy_check = bad["checks"][1]
    assert (toy_check["status"], toy_check["rank"]) == ("fail", 1)
    assert toy_check["message"] == "rank 1 never computed factorial(6)."
    assert toy_check["hint"] == "Call math.factorial everywhere."


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_broken_hook_makes_a_platform_error_with_its_stack_logged(
    toy: tuple[str, Path], tmp_path: Path
) -> None:
    name, lessons = toy
    broken = f"{name}_broken"
    with _modules(tmp_path, broken, hook=BROKEN_HOOK, check=""):
        result, log = _grade(lessons, EVERY_RANK, tmp_path)
    assert result["status"] == "error", result
    assert f"the grader's harness failed ({broken}, rank 0)" in result["error"]
    assert "RuntimeError: the toy hook is broken" in log
