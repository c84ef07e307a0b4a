"""`python -m grader grade`: exit codes 0 pass / 1 fail / 2 usage / 3 error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXERCISE_DIR = ROOT / "lessons" / "02-ddp-fundamentals" / "exercises" / "train"


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = tmp_path / "main.py"
    program.write_text("print('hi')\n")
    assert main(["grade", "--exercise", "no-such/exercise", str(program)]) == 2
    assert "no lesson file defines" in capsys.readouterr().err
    assert main(["grade", "--exercise", "ddp-fundamentals/train", str(tmp_path / "nope.py")]) == 2
    program.write_text("#" * (65 * 1024))
    assert main(["grade", "--exercise", "ddp-fundamentals/train", str(program)]) == 2
    assert "KiB" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["grade", str(program)])
    assert exc.value.code == 2


def test_platform_fault_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lesson = tmp_path / "01-x" / "lesson.yaml"
    lesson.parent.mkdir()
    lesson.write_text("id: x\nexercises:\n  - id: y\n    grading:\n      checks: [no.such.check]\n")
    program = tmp_path / "main.py"
    program.write_text("print('hi')\n")
    code = main(["grade", "--exercise", "x/y", "--lessons", str(tmp_path), "--json", str(program)])
    assert code == 3
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "error" and "no.such.check" in result["error"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "grader", "grade", "--exercise", "ddp-fundamentals/train", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.sandbox
@pytest.mark.slow
def test_lesson_solution_passes_and_starter_fails_in_the_sandbox() -> None:
    solution = _cli("--json", "--sandbox", "bwrap", str(EXERCISE_DIR / "solution.py"))
    assert solution.returncode == 0, solution.stdout + solution.stderr
    result = json.loads(solution.stdout)
    assert result["status"] == "pass"
    assert result["launch"]["sandbox"] == "bwrap" and result["launch"]["backend"] in (
        "gloo",
        "nccl",
    )
    epochs = result["artifacts"]["sampler"]["epochs"]
    assert len(epochs) == 3 and set(epochs[0]["ranks"]) == {"0", "1"}

    starter = _cli(
        "--sandbox", "bwrap", "--quiet", "--locale", "tr", str(EXERCISE_DIR / "starter.py")
    )
    assert starter.returncode == 1, starter.stdout + starter.stderr
    assert "FAIL  dist.init" in starter.stdout and "FAIL  sampler.shards" in starter.stdout
    # --locale tr: the report's texts in Turkish (ids stay as they are).
    assert "kontrolden" in starter.stdout.splitlines()[0]
    assert "dist.init: Her rank süreç grubuna katılıyor" in starter.stdout
