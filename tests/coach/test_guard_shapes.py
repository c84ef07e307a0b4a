"""The guard judges code in any shape: ~~~ fences, indented blocks, a program split over several
blocks; and a stream holds a code block back until it is closed and judged."""

from __future__ import annotations

from app.coach.guard import SolutionGuard, code_blocks, open_fence_at
from app.content.service import get_exercise


def guard_and_solution() -> tuple[SolutionGuard, str]:
    info = get_exercise("ddp-fundamentals/train")
    guard = SolutionGuard.for_exercise(info.solution_path, info.starter_code, "")
    assert guard is not None
    return guard, info.solution_path.read_text(encoding="utf-8")


def halves(program: str) -> tuple[str, str]:
    lines = program.splitlines()
    middle = next(
        n for n in range(len(lines) // 2, len(lines)) if lines[n].startswith(("def ", "class "))
    )
    return "\n".join(lines[:middle]), "\n".join(lines[middle:])


def test_a_program_in_any_shape_is_refused() -> None:
    guard, solution = guard_and_solution()
    first, second = halves(solution)
    indented = "\n".join("    " + line if line.strip() else "" for line in solution.splitlines())
    shapes = {
        "tilde": f"Here:\n\n~~~python\n{solution}\n~~~\n",
        "indented": f"Here:\n\n{indented}\n\nDone.",
        "split": f"First:\n\n```python\n{first}\n```\n\nThen:\n\n```python\n{second}\n```\n",
        "unclosed": f"Here:\n\n```\n{solution}",
    }
    for name, answer in shapes.items():
        assert guard.refusal(answer) is not None, name
    assert len(code_blocks(shapes["split"])) == 3  # both blocks, and both joined


def test_a_stream_holds_an_open_code_block() -> None:
    text = "Look at this:\n\n```python\nfor epoch in range(3):\n"
    start = open_fence_at(text)
    assert start is not None and text[start:].startswith("```python")
    assert open_fence_at(text + "    pass\n```\n") is None
    assert open_fence_at("~~~\nx = 1\n~~~\nand then\n") is None


def test_a_question_without_an_exercise_is_guarded_against_every_solution() -> None:
    from types import SimpleNamespace

    from app.coach.replies import refusal
    from app.coach.service import course_guards
    from tests.coach.handmade import exercises

    guards = course_guards("en")
    assert len(guards) == len(exercises())
    _, solution = guard_and_solution()
    prepared: object = SimpleNamespace(guard=None, other_guards=guards)
    assert refusal(prepared, f"```python\n{solution}\n```") is not None  # type: ignore[arg-type]
    assert refusal(prepared, "Call `set_epoch` on the sampler.") is None  # type: ignore[arg-type]
