"""What the model is told, and the check its answer must pass before a learner sees it.

The prompt carries the question, the learner's own code, the failed checks with their evidence
(the check asked about first, with its hint level and the course's authored text for that level,
and the instruction to stay at it), the lesson steps with their text (numbered, to be cited as
[1], [2], ...; the failed check's own step first) and the tutoring rules. It is built only from
those: the exercise's solution file is never read into it.
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
- Go no further than the coaching level given for the check: a nudge is a question that points
  at what to look at; a pointer names the call or idea that is wrong; a fix says what to change on
  the learner's own line. Build on the course's text for that level.
- No HTML."""

LEVEL_MEANING = {
    "nudge": "a nudge (a question that points at what to look at; no call named, no code)",
    "pointer": "a pointer (name the call or idea that is wrong; no code)",
    "fix": "a fix (what to change on the learner's own line; at most that one line)",
}


def build_messages(
    *,
    question: str,
    locale: str,
    code: str | None,
    run: RunEvidence | None,
    steps: list[StepHit],
    focus: str | None = None,
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
        parts.append(_evidence(run, focus, locale))
    if steps:
        listed = "\n".join(
            f"[{number}] {step.title} ({step.lesson_id}/{step.step_id}):\n{step.excerpt}\n"
            for number, step in enumerate(steps, start=1)
        )
        parts.append(f"Lesson steps:\n{listed}")
    return [
        {"role": "system", "content": TUTORING_RULES.format(language=language)},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def _evidence(run: RunEvidence, focus: str | None, locale: str) -> str:
    lines = [
        f"The grader's result: {run.status} ({run.summary}); "
        f"failed tries on this exercise so far: {run.failed_attempts}."
    ]
    ordered = sorted(run.failed, key=lambda check: check.id != focus)
    for number, check in enumerate(ordered):
        where = ", ".join(
            part
            for part in (
                f"rank {check.rank}" if check.rank is not None else "",
                f"line {check.line}" if check.line is not None else "",
            )
            if part
        )
        asked = " (the check the learner asks about)" if number == 0 else ""
        lines.append(
            f"- Failed check {check.id} ({check.title}){asked} at {where or 'every rank'}:"
        )
        lines.append(f"  what happened: {check.message}")
        if check.code_line:
            lines.append(f"  the learner's line: {check.code_line.strip()}")
        if check.case_text:
            lines.append(f"  what the run showed: {check.case_text}")
        if check.hint:
            lines.append(f"  why it is wrong: {check.hint}")
        if check.stack:
            lines.append("  the rank's stack:\n    " + check.stack.replace("\n", "\n    "))
        if number == 0:
            lines.append(f"  coaching level: {LEVEL_MEANING[check.level]}; stay at this level.")
            if check.levels is not None:
                authored = getattr(check.levels, check.level)
                lines.append(
                    f"  the course's text for this level: {authored.get(locale) or authored.en}"
                )
    return "\n".join(lines)
