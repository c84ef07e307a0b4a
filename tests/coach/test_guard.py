"""The guard on the model's answers judges code, not lines: a solution line found with its comment
taken off and other spacing, a whole program under other names, a program that sets up, loops and
cleans up; what the learner can already read (the prompt, the lesson's steps, their own code) is
allowed."""

from __future__ import annotations

import re

from app.coach.guard import SolutionGuard, is_whole_program
from app.coach.index import get_index
from app.coach.service import public_text
from app.content import service as content
from app.content.codeleak import strip_comment


def guard_for(exercise_id: str, learner_code: str = "") -> tuple[SolutionGuard, list[str]]:
    info = content.get_exercise(exercise_id)
    guard = SolutionGuard.for_exercise(
        info.solution_path, info.starter_code, learner_code, public_text(get_index(), "en", info)
    )
    assert guard is not None
    return guard, info.solution_path.read_text().splitlines()


def fenced(code: str) -> str:
    return f"Here is how [1]:\n\n```python\n{code}\n```\n"


def test_a_solution_line_is_found_without_its_comment_and_with_other_spacing() -> None:
    guard, solution = guard_for("ddp-fundamentals/accumulate")
    line = next(text for text in solution if "% ACCUM_STEPS == 0" in text)
    assert "#" in line  # the solution comments it
    respaced = strip_comment(line).strip().replace(" ", "")
    assert guard.refusal(f"Write `{respaced}` there.") is not None
    assert guard.refusal(fenced(strip_comment(line).strip())) is not None


def test_the_solution_under_other_names_is_refused() -> None:
    guard, solution = guard_for("ddp-fundamentals/train")
    start = solution.index("def train(device: torch.device) -> None:")
    body = "\n".join(
        strip_comment(line) for line in solution[start : solution.index("def main() -> None:")]
    )
    for old, new in (
        ("ddp_model", "net"),
        ("sampler", "shards"),
        ("loader", "batches"),
        ("optimizer", "opt"),
        ("loss_fn", "criterion"),
        ("dataset", "data"),
        ("epoch", "ep"),
        ("rank", "me"),
    ):
        body = re.sub(rf"\b{old}\b", new, body)
    assert guard.leaked_lines(body) == []  # no line of it is the solution's, word for word
    assert guard.refusal(fenced(body)) == "the answer holds the solution's code under other names"


def test_a_program_that_sets_up_loops_and_cleans_up_is_refused() -> None:
    program = """import torch.distributed as dist

dist.init_process_group("gloo")
for step in range(10):
    pass
dist.destroy_process_group()
"""
    assert is_whole_program(program)
    guard, _ = guard_for("ddp-fundamentals/train")
    assert guard.refusal(fenced(program)) == (
        "the answer holds a whole program (init, loop and cleanup)"
    )
    assert not is_whole_program("for x, y in loader:\n    optimizer.step()\n")


def test_what_the_learner_can_already_read_is_allowed() -> None:
    info = content.get_exercise("ddp-fundamentals/train")
    mine = "sampler = DistributedSampler(dataset, shuffle=True, seed=1)\nloader = None\n"
    guard, _ = guard_for("ddp-fundamentals/train", learner_code=mine)
    lesson = content.get_catalog().lessons["ddp-fundamentals"].lesson
    snippet = next(step.code for step in lesson.steps if step.id == "set-epoch")
    assert snippet
    prompt = str(info.prompt.en)
    assert guard.refusal(f"The exercise says:\n\n{prompt}\n\nand the step shows it [1]:") is None
    assert guard.refusal(fenced(snippet.strip())) is None
    assert guard.refusal(f"Your line 40 reads `{mine.splitlines()[0]}`; look at it.") is None
