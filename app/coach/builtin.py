"""The built-in coach: no model, no network. It answers the question that was asked, in the
learner's language:

- why a submission failed: the check the learner clicked (else the first failed one) explained
  from its evidence at its level (app/coach/levels.py), the other failed checks a line each;
- what a line or a message of their run means: that line of their program, the checks pointing
  at it and the rank's stack in their own frames;
- a concept: the lesson's own explanation, and with a run attached one sentence tying it to it;
- "give me the answer": a plain no, and the next level on the check instead;
- anything the course does not cover: an honest "not covered" (and, for a distributed-training
  topic the course only names, the nearest step), never unrelated excerpts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from app.coach.concepts import ConceptHit, get_concepts
from app.coach.evidence import FailedCheck, RunEvidence, SeenCheck
from app.coach.index import StepHit, StepIndex, url_of
from app.coach.intent import Intent
from app.coach.levels import Level
from app.coach.schemas import Source
from app.coach.topics import untaught_topic
from app.errors import N_
from app.i18n import get_translations, translate

EXPLANATION_CHARS = 500  # the lesson's explanation: whole paragraphs up to about this much
WHOLE = 0.999  # a share of the question's weight that is all of it


@dataclass
class Answer:
    markdown: str
    sources: list[Source] = field(default_factory=list)
    covered: bool = True  # False: the course does not cover what was asked

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


def link_to(hit: StepHit) -> str:
    return f"[{hit.title}]({url_of(hit.lesson_id, hit.position, hit.step_id)})"


class BuiltinCoach:
    def __init__(self, index: StepIndex, locale: str) -> None:
        self.index = index
        self.locale = locale

    def t(self, message: str, /, **params: Any) -> str:
        return translate(self.locale, message).format(**params)

    # ---- with a graded run ----------------------------------------------------------------
    def about_run(
        self,
        run: RunEvidence,
        intent: Intent,
        question: str,
        focus: str | None,
        asked_check: str | None = None,
    ) -> Answer:
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
        first = next(
            (c for c in run.failed if c.id == focus), run.failed[0] if run.failed else None
        )
        about_failure = intent.kind in ("why_failed", "hint", "still_stuck", "give_answer")
        seen = next((check for check in run.seen if check.id == asked_check), None)
        if seen is not None and (about_failure or intent.from_button):
            return self._did_not_fail(seen, run)
        if intent.kind == "give_answer":
            return self._refuse(first, run)
        if intent.kind == "faster":
            return self.faster(run)
        if intent.kind == "run_line" and first is not None:
            return self._explain_line(run, intent, first)
        if intent.kind in ("concept", "other"):
            answer = self.about_topic(question, run.lesson_id)
            self._tie(answer, run, first)
            return answer
        if first is None:
            answer = Answer(
                self.t(N_("Every check of this submission passed: there is no failure to explain."))
            )
            self._list_related(answer, question, run.lesson_id)
            return answer
        if intent.kind == "hint":
            return self._hint(run, first)
        return self._failure_report(run, first)

    def _did_not_fail(self, seen: SeenCheck, run: RunEvidence) -> Answer:
        """The learner asked about a check that passed (or was not judged) on this run."""
        if seen.status == "pass":
            text = self.t(
                N_(
                    "The check “{title}” passed on this run: {message} "
                    "There is nothing to fix there."
                ),
                title=seen.title,
                message=seen.message,
            )
        else:
            text = self.t(
                N_("The check “{title}” was not judged on this run: {message}"),
                title=seen.title,
                message=seen.message,
            )
        answer = Answer(text)
        if run.failed:
            heading = self.t(N_("The checks that failed:"))
            listed = "\n".join(f"- {self._one_line(check)}" for check in run.failed)
            answer.markdown += f"\n\n**{heading}**\n\n{listed}"
        return answer

    def _hint(self, run: RunEvidence, check: FailedCheck) -> Answer:
        """A hint on one failed check: what happened there and the advice at its level."""
        answer = Answer("")
        lines = [
            f"{self._repeat(check)}{self._level_phrase(check.level)}".strip(),
            f"### {check.title}",
            f"**{self.t(N_('What happened'))}** ({self._where(check)}): {check.message}",
        ]
        if check.code_line and check.level != "fix":
            lines.append(f"```python\n{check.code_line.strip()}\n```")
        lines.append(f"**{self.t(N_('What to change first'))}:** {self._advice(check)}")
        step = self._step_for(check, run.lesson_id)
        if step is not None:
            answer.cite(step)
            lines.append(
                self.t(N_("The lesson explains it in the step {link}."), link=link_to(step))
            )
        answer.markdown = "\n\n".join(lines)
        return answer

    def _repeat(self, check: FailedCheck) -> str:
        """Past the fix, how many times the learner asked: each answer differs from the last."""
        if check.level != "fix" or check.asked_before < 2:
            return ""
        return (
            self.t(
                N_(
                    "This is question {count} about this check of this submission. The fix "
                    "below is as far as the coach goes: change your own line, run the file "
                    "yourself with torchrun, and submit again."
                ),
                count=check.asked_before + 1,
            )
            + " "
        )

    def _failure_report(self, run: RunEvidence, first: FailedCheck) -> Answer:
        answer = Answer("")
        parts = [self._intro(run, first), self._explain_check(first, run.lesson_id, answer)]
        others = [check for check in run.failed if check is not first]
        if others:
            heading = self.t(N_("The other failed checks:"))
            listed = "\n".join(f"- {self._one_line(check)}" for check in others)
            parts.append(f"**{heading}**\n\n{listed}")
        answer.markdown = "\n\n".join(parts)
        return answer

    def _intro(self, run: RunEvidence, first: FailedCheck) -> str:
        ngettext = get_translations(self.locale).ngettext
        where = (
            ngettext(
                "Your run on {size} rank failed {count} of its checks.",
                "Your run on {size} ranks failed {count} of its checks.",
                run.world_size,
            ).format(size=run.world_size, count=len(run.failed))
            if run.world_size
            else self.t(N_("Your run failed {count} of its checks."), count=len(run.failed))
        )
        start = (
            self.t(N_("Start with this one: the others often follow from it."))
            if first is run.failed[0]
            else self.t(N_("Here is the one you asked about."))
        )
        return f"{where} {start} {self._repeat(first)}{self._level_phrase(first.level)}"

    def _level_phrase(self, level: Level) -> str:
        if level == "nudge":
            return self.t(N_("First a nudge: a question that points at what to look at."))
        if level == "pointer":
            return self.t(N_("You are still stuck here, so here is a pointer to what is wrong."))
        return self.t(N_("You are still stuck here, so here is what to change on your own line."))

    def _explain_check(self, check: FailedCheck, lesson_id: str, answer: Answer) -> str:
        lines = [f"### {check.title}"]
        happened = self.t(N_("What happened"))
        lines.append(f"**{happened}** ({self._where(check)}): {check.message}")
        if check.code_line and check.level != "fix":
            lines.append(f"```python\n{check.code_line.strip()}\n```")
        if check.stack:
            stuck = self.t(N_("Where the rank was"))
            lines.append(f"**{stuck}:**\n\n```text\n{check.stack}\n```")
        why_text = self._why(check)
        if why_text:
            why = self.t(N_("Why it is wrong"))
            lines.append(f"**{why}:** {why_text}")
        first = self.t(N_("What to change first"))
        lines.append(f"**{first}:** {self._advice(check)}")
        step = self._step_for(check, lesson_id)
        if step is not None:
            answer.cite(step)
            lines.append(
                self.t(N_("The lesson explains it in the step {link}."), link=link_to(step))
            )
        return "\n\n".join(lines)

    @staticmethod
    def _why(check: FailedCheck) -> str | None:
        """What the run showed, else the check's hint; a nudge shows no hint (hints name the
        calls and may hold code: that is for the pointer and the fix)."""
        return check.case_text or (check.hint if check.level != "nudge" else None)

    def _one_line(self, check: FailedCheck) -> str:
        return f"**{check.title}** ({self._where(check)}): {check.message}"

    def _where(self, check: FailedCheck) -> str:
        if check.rank is not None and check.line is not None:
            return self.t(N_("rank {rank}, line {line}"), rank=check.rank, line=check.line)
        if check.rank is not None:
            return self.t(N_("rank {rank}"), rank=check.rank)
        if check.line is not None:
            return self.t(N_("line {line}"), line=check.line)
        return self.t(N_("every rank"))

    def _advice(self, check: FailedCheck) -> str:
        levels = check.levels
        if check.level == "nudge":
            if levels is not None:
                return levels.nudge.get(self.locale) or levels.nudge.en
            return self.t(
                N_(
                    "Compare what your program does there with the step linked below: "
                    "what does it do differently?"
                )
            )
        if check.level == "pointer":
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
            f"{check.title} {check.hint or ''}",
            self.locale,
            lesson_id=lesson_id,
            limit=1,
            relevant_only=False,
        )
        return hits[0] if hits else None

    def _refuse(self, first: FailedCheck | None, run: RunEvidence | None) -> Answer:
        no = self.t(
            N_(
                "The coach will not write the solution for you: working it out is how it "
                "sticks, and the grader checks what your own program does."
            )
        )
        if first is None or run is None:
            more = self.t(
                N_(
                    "Submit your program and ask about its result: the coach then takes you "
                    "there one step at a time, from a nudge to the fix of your own line."
                )
            )
            return Answer(f"{no} {more}")
        answer = Answer("")
        instead = self.t(N_("Here is the next step on the check you are stuck on instead."))
        answer.markdown = f"{no} {instead}\n\n" + self._explain_check(first, run.lesson_id, answer)
        return answer

    def _explain_line(self, run: RunEvidence, intent: Intent, first: FailedCheck) -> Answer:
        line = intent.line if intent.line is not None else first.line
        at_line = [
            check
            for check in run.failed
            if line is not None
            and check.line == line
            and (intent.rank is None or check.rank in (None, intent.rank))
        ]
        code_lines = run.code.splitlines()
        parts = []
        if line is not None and 1 <= line <= len(code_lines):
            parts.append(self.t(N_("Line {line} of your program:"), line=line))
            parts.append(f"```python\n{code_lines[line - 1].strip()}\n```")
        if at_line:
            parts.append(self.t(N_("What the grader saw there:")))
            parts.append("\n".join(f"- {self._one_line(check)}" for check in at_line))
            why_text = next((text for check in at_line if (text := self._why(check))), None)
            if why_text:
                why = self.t(N_("Why it is wrong"))
                parts.append(f"**{why}:** {why_text}")
        else:
            parts.append(
                self.t(N_("No failed check points at that line. The failed checks point at:"))
            )
            parts.append("\n".join(f"- {self._one_line(check)}" for check in run.failed))
        stack = next((check.stack for check in at_line or [first] if check.stack), None)
        if stack:
            stuck = self.t(N_("Where the rank was"))
            parts.append(f"**{stuck}:**\n\n```text\n{stack}\n```")
        answer = Answer("\n\n".join(parts))
        step = self._step_for(at_line[0] if at_line else first, run.lesson_id)
        if step is not None:
            answer.cite(step)
            answer.markdown += "\n\n" + self.t(
                N_("The lesson explains it in the step {link}."), link=link_to(step)
            )
        return answer

    def _tie(self, answer: Answer, run: RunEvidence, first: FailedCheck | None) -> None:
        """One sentence tying a concept to the learner's run."""
        if not answer.covered:
            return
        if first is None:
            tie = self.t(N_("In your run every check passed, so your program already does this."))
        else:
            cited = {source.step_id for source in answer.sources}
            related = next(
                (
                    check
                    for check in run.failed
                    if check.levels is not None and check.levels.step in cited
                ),
                first,
            )
            tie = self.t(
                N_("In your run the check “{title}” failed ({where}): {message}"),
                title=related.title,
                where=self._where(related),
                message=related.message,
            )
        answer.markdown = f"{answer.markdown}\n\n{tie}"

    # ---- without a run ----------------------------------------------------------------------
    def faster(self, run: RunEvidence | None) -> Answer:
        """How the program could be faster: what the checks observed about it (overlap,
        buckets), then what cannot be judged from here and how to measure it."""
        parts = []
        observed = [
            check
            for check in (run.seen if run is not None else [])
            if check.status == "pass" and check.id.startswith(("overlap.", "ddp.", "accum."))
        ]
        if observed:
            parts.append(self.t(N_("What the grader observed in your run:")))
            parts.append("\n".join(f"- **{check.title}**: {check.message}" for check in observed))
        elif run is not None:
            parts.append(
                self.t(
                    N_(
                        "The checks of this exercise judge whether your program is right, not "
                        "how fast it is: nothing in this run measured its speed."
                    )
                )
            )
        parts.append(
            self.t(
                N_(
                    "The coach cannot judge speed from here: the grader runs on shared CPU "
                    "workers. Measure it yourself on your own machine: time a few hundred steps "
                    "(after a few warm-up steps, with torch.cuda.synchronize() before reading the "
                    "clock on a GPU) with the all-reduces overlapped and then waited on only "
                    "after backward, and compare the time per step; torch.profiler shows whether "
                    "the all-reduces run during backward or after it."
                )
            )
        )
        return Answer("\n\n".join(parts))

    def answer_question(self, intent: Intent, question: str, lesson_id: str) -> Answer:
        if intent.kind == "give_answer":
            return self._refuse(None, None)
        if intent.kind == "faster":
            return self.faster(None)
        return self.about_topic(question, lesson_id)

    def about_topic(self, question: str, lesson_id: str) -> Answer:
        """The lesson's own explanation of what was asked, or an honest "not covered"."""
        topic = untaught_topic(question)
        concept = get_concepts().search(question, self.locale, lesson_id) if not topic else None
        if concept is not None:
            return self._concept_answer(concept)
        hits = self._hits(question, lesson_id)
        if topic is not None:
            nearest = next(
                (
                    hit
                    for hit in self.index.steps_of(topic.lesson_id, self.locale)
                    if hit.step_id == topic.step_id
                ),
                None,
            )
            text = self.t(N_("This course does not teach {topic}."), topic=topic.name)
            answer = Answer(text, covered=False)
            if nearest is not None:
                answer.cite(nearest)
                answer.markdown += " " + self.t(
                    N_("The nearest it comes is the step {link}."), link=link_to(nearest)
                )
            return answer
        if not hits:
            return Answer(
                self.t(
                    N_(
                        "This course does not cover that: it teaches distributed training with "
                        "PyTorch (DDP, torchrun, collectives, sharded state). Ask about one of "
                        "those, or about your own run."
                    )
                ),
                covered=False,
            )
        best = hits[0]
        answer = Answer("")
        answer.cite(best)
        said = self.t(N_("The step {link} explains it:"), link=link_to(best))
        explained = _first_paragraphs(self.index.text_of(best.lesson_id, best.step_id, self.locale))
        answer.markdown = f"{said}\n\n{_blockquote(explained)}"
        if len(hits) > 1:
            also = self.t(N_("More about it:"))
            for hit in hits[1:]:
                answer.cite(hit)
            answer.markdown += f"\n\n{also} " + ", ".join(link_to(hit) for hit in hits[1:])
        return answer

    def _concept_answer(self, hit: ConceptHit) -> Answer:
        """The instructors' own explanation of the concept, and the steps that teach it."""
        concept = hit.concept
        name = (concept.terms.get(self.locale) or concept.terms.get("en") or [concept.id])[0]
        text = concept.answer.get(self.locale) or concept.answer.en
        answer = Answer(f"**{name}**: {text}")
        steps = {step.step_id: step for step in self.index.steps_of(hit.lesson_id, self.locale)}
        taught = [steps[step_id] for step_id in concept.steps if step_id in steps]
        if taught:
            for step in taught:
                answer.cite(step)
            answer.markdown += "\n\n" + self.t(
                N_("The lesson explains it in the step {link}."), link=link_to(taught[0])
            )
            if len(taught) > 1:
                also = self.t(N_("More about it:"))
                answer.markdown += f" {also} " + ", ".join(link_to(step) for step in taught[1:])
        if concept.check is not None:
            question = concept.check.get(self.locale) or concept.check.en
            answer.markdown += "\n\n" + self.t(N_("Check yourself: {question}"), question=question)
        return answer

    def _hits(self, question: str, lesson_id: str) -> list[StepHit]:
        """This lesson's best steps; the whole course's when the lesson's are weak: fewer than
        two, or another lesson's best step holds more of the question (or as much, and all of
        it in its title)."""
        hits = self.index.search(question, self.locale, lesson_id=lesson_id, limit=3)
        course = self.index.search(question, self.locale, limit=3)
        if course and (not hits or self._better(question, course[0], hits[0])):
            hits.insert(0, course[0])
        if len(hits) < 2:
            hits += course
        unique = {(hit.lesson_id, hit.step_id): hit for hit in reversed(hits)}
        ordered = sorted(unique.values(), key=hits.index)
        return ordered[:3]

    def _better(self, question: str, other: StepHit, best: StepHit) -> bool:
        other_step, other_title = self.index.coverage(question, other, self.locale)
        best_step, best_title = self.index.coverage(question, best, self.locale)
        whole_title = other_title >= WHOLE and best_title < WHOLE
        return other_step > best_step or (other_step == best_step and whole_title)

    def _list_related(self, answer: Answer, question: str, lesson_id: str) -> None:
        hits = self._hits(question, lesson_id)
        if not hits:
            return
        heading = self.t(N_("These steps of the lessons are about your question:"))
        for hit in hits:
            answer.cite(hit)
        listed = "\n".join(f"- {link_to(hit)}" for hit in hits)
        answer.markdown = f"{answer.markdown}\n\n{heading}\n\n{listed}"


_PARAGRAPHS = re.compile(r"\n\s*\n")


def _first_paragraphs(markdown: str) -> str:
    """Whole paragraphs from the start, up to about EXPLANATION_CHARS (at least one)."""
    kept: list[str] = []
    for paragraph in _PARAGRAPHS.split(markdown.strip()):
        if kept and sum(len(text) for text in kept) + len(paragraph) > EXPLANATION_CHARS:
            break
        kept.append(paragraph.strip())
    return "\n\n".join(kept)


def _blockquote(markdown: str) -> str:
    return "\n".join(f"> {line}" if line.strip() else ">" for line in markdown.splitlines())
