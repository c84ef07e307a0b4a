"""The built-in coach: no model, no network. Explains a run's failed checks from their evidence
and answers free questions with the lesson steps the index ranks best, in the learner's language.

Escalation over the learner's failed attempts on the exercise: the first failure gets a nudge (a
question that points at what to look at), the second a pointer (which call or idea is wrong), the
third and later a worked fix of the learner's own line. Never the whole solution file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from app.coach.evidence import FailedCheck, RunEvidence
from app.coach.index import StepHit, StepIndex, url_of
from app.coach.schemas import Source
from app.errors import N_
from app.i18n import translate

Level = Literal["nudge", "pointer", "fix"]
MAX_EXPLAINED_CHECKS = 3
FIX_AFTER_ATTEMPTS = 3


@dataclass
class Answer:
    markdown: str
    sources: list[Source] = field(default_factory=list)

    def cite(self, hit: StepHit) -> None:
        if all(
            source.step_id != hit.step_id or source.lesson_id != hit.lesson_id
            for source in self.sources
        ):
            self.sources.append(source_of(hit))


def source_of(hit: StepHit) -> Source:
    return Source(
        lesson_id=hit.lesson_id,
        step_id=hit.step_id,
        title=hit.title,
        url=url_of(hit.lesson_id, hit.position, hit.step_id),
    )


def level_for(failed_attempts: int) -> Level:
    if failed_attempts >= FIX_AFTER_ATTEMPTS:
        return "fix"
    return "pointer" if failed_attempts == 2 else "nudge"


class BuiltinCoach:
    def __init__(self, index: StepIndex, locale: str) -> None:
        self.index = index
        self.locale = locale

    def t(self, message: str, **params: Any) -> str:
        return translate(self.locale, message).format(**params)

    # ---- a graded run ---------------------------------------------------------------------
    def explain_run(self, run: RunEvidence, question: str) -> Answer:
        if run.status == "error":
            return Answer(
                self.t(
                    N_(
                        "The grader itself failed on this submission, so it does not count "
                        "against you and there is nothing in your code to explain yet. "
                        "Submit again."
                    )
                )
            )
        if not run.failed:
            answer = Answer(
                self.t(N_("Every check of this submission passed: there is no failure to explain."))
            )
            self._add_related(answer, question, run.lesson_id, heading=True)
            return answer
        level = level_for(run.failed_attempts)
        parts = [self._intro(run, level)]
        answer = Answer("")
        for number, check in enumerate(run.failed[:MAX_EXPLAINED_CHECKS], start=1):
            parts.append(self._explain_check(number, check, level, run.lesson_id, answer))
        hidden = len(run.failed) - MAX_EXPLAINED_CHECKS
        if hidden > 0:
            parts.append(
                self.t(
                    N_(
                        "{count} more checks failed; fix these first, as they often cause the rest."
                    ),
                    count=hidden,
                )
            )
        answer.markdown = "\n\n".join(parts)
        return answer

    def _intro(self, run: RunEvidence, level: Level) -> str:
        where = (
            self.t(
                N_("Your run on {size} ranks failed {count} of its checks."),
                size=run.world_size,
                count=len(run.failed),
            )
            if run.world_size
            else self.t(N_("Your run failed {count} of its checks."), count=len(run.failed))
        )
        first = self.t(N_("Fix the first one first: the others often follow from it."))
        if level == "nudge":
            how = self.t(N_("This is your first failed try, so here is a nudge for each."))
        elif level == "pointer":
            how = self.t(
                N_("This is your second failed try, so here is a pointer to what is wrong.")
            )
        else:
            how = self.t(
                N_("You have tried {attempts} times, so here is what to change on your own line."),
                attempts=run.failed_attempts,
            )
        return f"{where} {first} {how}"

    def _explain_check(
        self, number: int, check: FailedCheck, level: Level, lesson_id: str, answer: Answer
    ) -> str:
        lines = [f"### {number}. {check.title}"]
        happened = self.t(N_("What happened"))
        lines.append(f"**{happened}** ({self._where(check)}): {check.message}")
        if check.code_line and level != "fix":
            lines.append(f"```python\n{check.code_line.strip()}\n```")
        if check.stack:
            stuck = self.t(N_("Where the rank was"))
            lines.append(f"**{stuck}:**\n\n```text\n{check.stack}\n```")
        if check.hint:
            why = self.t(N_("Why it is wrong"))
            lines.append(f"**{why}:** {check.hint}")
        first = self.t(N_("What to change first"))
        lines.append(f"**{first}:** {self._advice(check, level)}")
        step = self._step_for(check, lesson_id)
        if step is not None:
            answer.cite(step)
            link = f"[{step.title}]({url_of(step.lesson_id, step.position, step.step_id)})"
            lines.append(self.t(N_("The lesson explains it in the step {link}."), link=link))
        return "\n\n".join(lines)

    def _where(self, check: FailedCheck) -> str:
        if check.rank is not None and check.line is not None:
            return self.t(N_("rank {rank}, line {line}"), rank=check.rank, line=check.line)
        if check.rank is not None:
            return self.t(N_("rank {rank}"), rank=check.rank)
        if check.line is not None:
            return self.t(N_("line {line}"), line=check.line)
        return self.t(N_("every rank"))

    def _advice(self, check: FailedCheck, level: Level) -> str:
        levels = check.levels
        if level == "nudge":
            if levels is not None:
                return levels.nudge.get(self.locale) or levels.nudge.en
            return self.t(
                N_(
                    "Compare what your program does there with the step linked below: "
                    "what does it do differently?"
                )
            )
        if level == "pointer":
            if levels is not None:
                return levels.pointer.get(self.locale) or levels.pointer.en
            return self.t(
                N_("Start with the call the hint names; the step linked below shows it in context.")
            )
        fix = (
            (levels.fix.get(self.locale) or levels.fix.en)
            if levels is not None
            else self.t(N_("Change this line as the hint says, then submit again."))
        )
        if check.code_line is None:
            return fix
        mine = self.t(N_("Your line {line}:"), line=check.line)
        return f"{fix}\n\n{mine}\n\n```python\n{check.code_line.strip()}\n```"

    def _step_for(self, check: FailedCheck, lesson_id: str) -> StepHit | None:
        if check.levels is not None and check.levels.step is not None:
            for hit in self.index.steps_of(lesson_id, self.locale):
                if hit.step_id == check.levels.step:
                    return hit
        hits = self.index.search(
            f"{check.title} {check.hint or ''}", self.locale, lesson_id=lesson_id, limit=1
        )
        return hits[0] if hits else None

    # ---- a free question ------------------------------------------------------------------
    def answer_question(self, question: str, lesson_id: str) -> Answer:
        answer = Answer("")
        if not self._add_related(answer, question, lesson_id, heading=False):
            answer.markdown = self.t(
                N_(
                    "I found nothing in the lessons about that. Try other words, for example "
                    "the name of the function or of the error you see."
                )
            )
        return answer

    def _add_related(self, answer: Answer, question: str, lesson_id: str, *, heading: bool) -> bool:
        hits = self.index.search(question, self.locale, lesson_id=lesson_id, limit=3)
        if len(hits) < 2:  # too little in this lesson: look in the whole course
            seen = {(hit.lesson_id, hit.step_id) for hit in hits}
            more = self.index.search(question, self.locale, limit=3)
            hits += [hit for hit in more if (hit.lesson_id, hit.step_id) not in seen][
                : 3 - len(hits)
            ]
        if not hits:
            return False
        title = (
            N_("These steps of the lessons are about your question:")
            if heading
            else N_("These steps of the lessons answer that best:")
        )
        parts = [answer.markdown, self.t(title)] if answer.markdown else [self.t(title)]
        for hit in hits:
            answer.cite(hit)
            url = url_of(hit.lesson_id, hit.position, hit.step_id)
            parts.append(f"- **[{hit.title}]({url})**: {_quote(hit.excerpt)}")
        answer.markdown = "\n\n".join(parts)
        return True


def _quote(excerpt: str) -> str:
    """An excerpt as plain text inside Markdown (its own symbols must not format anything)."""
    return "“" + excerpt.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]") + "”"
