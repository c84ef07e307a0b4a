"""Lesson content in one locale, as the pages and the API serve it.

Every text falls back to English per field; `fallback_fields` names each field that did (dotted
paths by id, e.g. `steps.meet-ddp.body`), so a page can say that parts are not translated yet.
Quiz answers and explanations are not part of a localized lesson: see `service.check_answer`.
"""

from __future__ import annotations

import hashlib

from pydantic import BaseModel, Field

from app.content.loader import Catalog, LoadedLesson
from app.content.markdown import render_code_block, render_inline, render_markdown
from app.content.schemas import CardKind, Text


class LocalizedStep(BaseModel):
    id: str
    title: str
    body: str = Field(description="Markdown")
    body_html: str
    code: str | None = None
    code_html: str | None = None


class LocalizedChoice(BaseModel):
    id: str
    text: str = Field(description="Inline Markdown")
    text_html: str


class LocalizedQuestion(BaseModel):
    id: str
    question: str = Field(description="Inline Markdown")
    question_html: str
    choices: list[LocalizedChoice]


class LocalizedExercise(BaseModel):
    id: str = Field(description="The full exercise id, e.g. ddp-fundamentals/train")
    slug: str
    title: str
    prompt: str = Field(description="Markdown")
    prompt_html: str
    starter_code: str
    starter_fallback: bool = Field(
        default=False,
        description="The starter's comments are in English: no current translation in the locale",
    )


class LocalizedCard(BaseModel):
    """One card of the lesson's sequence: which step, question or exercise comes there."""

    kind: CardKind
    id: str = Field(description="The step's or question's id, the exercise's slug")


class LocalizedLesson(BaseModel):
    id: str
    number: int
    locale: str
    title: str
    summary: str
    duration_minutes: int
    steps: list[LocalizedStep]
    quiz: list[LocalizedQuestion]
    exercises: list[LocalizedExercise]
    sequence: list[LocalizedCard] = Field(
        description="The order of the cards as the author set it (steps, questions and "
        "exercises interleaved); `?step=N` on the lesson page is the Nth card"
    )
    fallback_fields: list[str] = Field(description="Fields shown in English: no translation yet")
    etag: str


class LessonSummary(BaseModel):
    id: str
    number: int | None
    title: str
    summary: str
    duration_minutes: int | None
    step_count: int
    card_count: int = Field(
        0,
        description="Every card of the lesson's sequence (steps, questions and exercises): the "
        'lesson page\'s "Step 1 of N"',
    )
    available: bool = True


class LocalizedFaqEntry(BaseModel):
    id: str
    question: str
    answer: str
    answer_html: str


class LocalizedCourse(BaseModel):
    id: str
    locale: str
    title: str
    summary: str
    lessons: list[LessonSummary]
    faq: list[LocalizedFaqEntry]
    fallback_fields: list[str]
    etag: str


class _Localizer:
    """Picks each text in the locale and remembers which ones fell back to English."""

    def __init__(self, locale: str, stale: frozenset[str] = frozenset()) -> None:
        self.locale = locale
        self.stale = stale  # translated from an older English: shown as missing
        self.fallback_fields: list[str] = []

    def __call__(self, text: Text, path: str) -> str:
        translated = text.get(self.locale)
        if translated is None or path in self.stale:
            self.fallback_fields.append(path)
            return text.en
        return translated


def _etag(model: BaseModel) -> str:
    digest = hashlib.sha256(model.model_dump_json(exclude={"etag"}).encode()).hexdigest()
    return f'"{digest[:32]}"'


def localize_lesson(loaded: LoadedLesson, locale: str) -> LocalizedLesson:
    lesson = loaded.lesson
    tr = _Localizer(locale, loaded.stale.get(locale, frozenset()))
    steps = []
    for step in lesson.steps:
        title = tr(step.title, f"steps.{step.id}.title")
        body = tr(step.body, f"steps.{step.id}.body")
        steps.append(
            LocalizedStep(
                id=step.id,
                title=title,
                body=body,
                body_html=render_markdown(body),
                code=step.code,
                code_html=render_code_block(step.code) if step.code else None,
            )
        )
    quiz = []
    for question in lesson.quiz:
        text = tr(question.question, f"quiz.{question.id}.question")
        choices = []
        for choice in question.choices:
            label = tr(choice.text, f"quiz.{question.id}.choices.{choice.id}.text")
            html = render_inline(label)
            choices.append(LocalizedChoice(id=choice.id, text=label, text_html=html))
        quiz.append(
            LocalizedQuestion(
                id=question.id, question=text, question_html=render_inline(text), choices=choices
            )
        )
    exercises = []
    for exercise in lesson.exercises:
        title = tr(exercise.title, f"exercises.{exercise.id}.title")
        prompt = tr(exercise.prompt, f"exercises.{exercise.id}.prompt")
        # The starter's comments in the learner's language, where a current translation exists.
        translated = loaded.starter_translations.get(exercise.id, {}).get(locale)
        starter = translated or loaded.starter_code[exercise.id]
        fallback = locale != "en" and translated is None  # the exercise says so, not the lesson
        exercises.append(
            LocalizedExercise(
                id=f"{lesson.id}/{exercise.id}",
                slug=exercise.id,
                title=title,
                prompt=prompt,
                prompt_html=render_markdown(prompt),
                starter_code=starter,
                starter_fallback=fallback,
            )
        )
    localized = LocalizedLesson(
        id=lesson.id,
        number=loaded.number,
        locale=locale,
        title=tr(lesson.title, "title"),
        summary=tr(lesson.summary, "summary"),
        duration_minutes=lesson.duration_minutes,
        steps=steps,
        quiz=quiz,
        exercises=exercises,
        sequence=[LocalizedCard(kind=kind, id=card_id) for kind, card_id in lesson.cards()],
        fallback_fields=tr.fallback_fields,
        etag="",
    )
    localized.etag = _etag(localized)
    return localized


def localize_course(catalog: Catalog, locale: str) -> LocalizedCourse:
    course = catalog.course
    tr = _Localizer(locale)
    summaries = []
    for lesson_id in course.lessons:
        loaded = catalog.lessons.get(lesson_id)
        if loaded is None:
            summaries.append(
                LessonSummary(
                    id=lesson_id,
                    number=None,
                    title=lesson_id.replace("-", " ").capitalize(),
                    summary="",
                    duration_minutes=None,
                    step_count=0,
                    available=False,
                )
            )
            continue
        lesson = loaded.lesson
        summaries.append(
            LessonSummary(
                id=lesson.id,
                number=loaded.number,
                title=tr(lesson.title, f"lessons.{lesson.id}.title"),
                summary=tr(lesson.summary, f"lessons.{lesson.id}.summary"),
                duration_minutes=lesson.duration_minutes,
                step_count=len(lesson.steps),
                card_count=len(lesson.cards()),
            )
        )
    faq = []
    for entry in course.faq:
        question = tr(entry.question, f"faq.{entry.id}.question")
        answer = tr(entry.answer, f"faq.{entry.id}.answer")
        faq.append(
            LocalizedFaqEntry(
                id=entry.id,
                question=question,
                answer=answer,
                answer_html=render_markdown(answer),
            )
        )
    localized = LocalizedCourse(
        id=course.id,
        locale=locale,
        title=tr(course.title, "title"),
        summary=tr(course.summary, "summary"),
        lessons=summaries,
        faq=faq,
        fallback_fields=tr.fallback_fields,
        etag="",
    )
    localized.etag = _etag(localized)
    return localized
