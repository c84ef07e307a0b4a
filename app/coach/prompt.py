"""What the model is told, and the check its answer must pass before a learner sees it.

The prompt carries the question, the learner's own code, the failed checks with their evidence,
the retrieved lesson steps (numbered, to be cited as [1], [2], ...) and the tutoring rules. It is
built only from those: the exercise's solution file is never read into it.
"""

from __future__ import annotations

from app.coach.evidence import RunEvidence
from app.coach.index import StepHit
from app.i18n import LOCALE_NAMES

MAX_CODE_CHARS = 12_000

TUTORING_RULES = """You are the coach of Rendezvous, a course on PyTorch distributed training.
Rules:
- Answer in {language}, in Markdown, in at most about 250 words.
- Ground every claim in what is given below: the grader's evidence about the learner's run (which
  rank, which line, what happened) and the numbered lesson steps. Do not guess beyond them.
- Explain why the code is wrong and what to change first; point at the learner's own lines.
- Never write out a complete program or a complete solution; at most one corrected line of the
  learner's own code.
- Cite the lesson steps you used as [1], [2], ... matching their numbers below.
- No HTML."""


def build_messages(
    *,
    question: str,
    locale: str,
    code: str | None,
    run: RunEvidence | None,
    steps: list[StepHit],
) -> list[dict[str, str]]:
    language = LOCALE_NAMES.get(locale, "English")
    parts = [f"Question from the learner:\n{question}"]
    if code:
        numbered = "\n".join(
            f"{number:4d}| {line}" for number, line in enumerate(code.splitlines(), start=1)
        )
        parts.append(
            f"The learner's program (main.py):\n```python\n{numbered[:MAX_CODE_CHARS]}\n```"
        )
    if run is not None:
        parts.append(_evidence(run))
    if steps:
        listed = "\n".join(
            f"[{number}] {step.title} ({step.lesson_id}/{step.step_id}): {step.excerpt}"
            for number, step in enumerate(steps, start=1)
        )
        parts.append(f"Lesson steps:\n{listed}")
    return [
        {"role": "system", "content": TUTORING_RULES.format(language=language)},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def _evidence(run: RunEvidence) -> str:
    lines = [
        f"The grader's result: {run.status} ({run.summary}); "
        f"failed tries on this exercise so far: {run.failed_attempts}."
    ]
    for check in run.failed:
        where = ", ".join(
            part
            for part in (
                f"rank {check.rank}" if check.rank is not None else "",
                f"line {check.line}" if check.line is not None else "",
            )
            if part
        )
        lines.append(f"- Failed check {check.id} ({check.title}) at {where or 'every rank'}:")
        lines.append(f"  what happened: {check.message}")
        if check.code_line:
            lines.append(f"  the learner's line: {check.code_line.strip()}")
        if check.hint:
            lines.append(f"  why it is wrong: {check.hint}")
        if check.stack:
            lines.append("  the rank's stack:\n    " + check.stack.replace("\n", "\n    "))
    return "\n".join(lines)
