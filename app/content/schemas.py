"""The lesson content model: what `lessons/course.yaml` and each `lesson.yaml` may contain.

These pydantic models are the single source of truth for validation (`python -m app.content
validate`) and for the JSON Schema editors use (`python -m app.content schema`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from grader.contract import ExerciseSpec
from grader.i18n import LOCALES

SLUG_PATTERN = r"^[a-z0-9]+(-[a-z0-9]+)*$"

Slug = Annotated[str, Field(pattern=SLUG_PATTERN, min_length=1, max_length=64)]


def _text_json_schema(schema: dict[str, Any]) -> None:
    """In the JSON Schema a text is a plain string (English) or the per-locale map."""
    as_map = dict(schema)
    as_map["properties"] = {
        locale: {"type": "string", "minLength": 1, "title": locale} for locale in LOCALES
    }
    as_map["properties"]["en"]["description"] = "English, required"
    as_map["additionalProperties"] = False
    schema.clear()
    schema["anyOf"] = [
        {"type": "string", "minLength": 1, "description": "English text"},
        as_map,
    ]


class Text(BaseModel):
    """A text the author may translate: a plain string (English) or a map with `en` and any of
    the other supported locales (`grader.i18n.LOCALES`, e.g. `tr`, `pt-BR`). A locale left out
    falls back to English where the text is shown (the page says so)."""

    model_config = ConfigDict(extra="allow", json_schema_extra=_text_json_schema)

    en: str = Field(min_length=1, description="English, required")

    @model_validator(mode="before")
    @classmethod
    def _plain_string_is_english(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"en": value}
        if isinstance(value, dict):
            unknown = sorted(str(key) for key in value if key not in LOCALES)
            if unknown:
                raise ValueError(
                    f"has texts in {', '.join(unknown)}, which is not a supported locale: use "
                    f"{', '.join(LOCALES)} (a new language is added in grader.i18n.LOCALES, see "
                    "docs/translating.md)"
                )
            empty = sorted(
                str(key)
                for key, text in value.items()
                if key != "en" and not (isinstance(text, str) and text.strip())
            )
            if empty:
                raise ValueError(f"the {', '.join(empty)} text must be a non-empty string")
        return value

    def get(self, locale: str) -> str | None:
        """The text in `locale`, or None when it has no translation there."""
        if locale == "en":
            return self.en
        text = (self.model_extra or {}).get(locale)
        return text if isinstance(text, str) else None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Step(_Strict):
    """One step card: a title, a short Markdown body and an optional code snippet."""

    id: Slug
    title: Text
    body: Text = Field(description="Markdown; raw HTML is shown as text")
    code: str | None = Field(None, description="Python snippet, not translated")


class Choice(_Strict):
    id: Annotated[str, Field(pattern=r"^[a-z0-9-]+$", min_length=1, max_length=16)]
    text: Text


class QuizQuestion(_Strict):
    id: Slug
    question: Text
    choices: list[Choice] = Field(min_length=2, max_length=8)
    answer: str = Field(description="The id of the right choice")
    explanation: Text

    @field_validator("answer")
    @classmethod
    def _answer_is_a_choice(cls, answer: str, info: ValidationInfo) -> str:
        choices: list[Choice] | None = info.data.get("choices")
        if choices is None:  # the choices themselves are invalid and reported already
            return answer
        ids = [choice.id for choice in choices]
        if answer not in ids:
            raise ValueError(
                f"the answer {answer!r} is not one of the choices ({', '.join(ids)}); "
                "set it to the id of the right choice"
            )
        return answer


class HintLevels(_Strict):
    """What the coach says about one failed check, escalating over the learner's attempts."""

    step: Slug | None = Field(None, description="The id of the step of this lesson that teaches it")
    nudge: Text = Field(description="First failure: a question that points at what to look at")
    pointer: Text = Field(description="Second failure: which call or idea is wrong")
    fix: Text = Field(
        description="After several failures: what to change on the learner's own line "
        "(shown beside that line; never the whole solution)"
    )


class Edit(_Strict):
    """One text replacement in the solution: `find` must occur exactly once in it (checked by
    `validate`, after the edits before it)."""

    find: str = Field(min_length=1, description="Text of solution.py; must occur exactly once")
    replace: str = Field(description="What replaces it (may be empty)")


class Ablation(_Strict):
    """An essential of a right answer, stated by breaking it: the solution with `edits` applied
    must fail, with the check `fails` among the failed ones (docs/authoring.md, "Ablations")."""

    id: Slug
    what: str = Field(min_length=1, description="Plain English, for authors (not learner-facing)")
    edits: list[Edit] = Field(min_length=1, description="Applied in order to solution.py")
    fails: str = Field(description="The check id that must fail")
    launch: int | None = Field(
        None,
        ge=0,
        description="Grade only this launch (an index into the exercise's launches: one per "
        "world size in `grading.launch.world_sizes`, then the multi-node one); default: all",
    )


class Exercise(_Strict):
    """A graded exercise; starter.py and solution.py live in exercises/<id>/ next to the lesson."""

    id: Slug
    title: Text
    prompt: Text = Field(description="Markdown")
    grading: ExerciseSpec
    # The coach's levelled hints per check id (the check must be in `grading.checks`).
    hint_levels: dict[str, HintLevels] = Field(default_factory=dict)
    # Named edits of the solution that must fail, each with the check that must catch it.
    ablations: list[Ablation] = Field(default_factory=list)

    @field_validator("hint_levels")
    @classmethod
    def _hinted_checks_are_graded(
        cls, levels: dict[str, HintLevels], info: ValidationInfo
    ) -> dict[str, HintLevels]:
        grading: ExerciseSpec | None = info.data.get("grading")
        if grading is None:  # reported already
            return levels
        unknown = sorted(set(levels) - set(grading.checks))
        if unknown:
            raise ValueError(
                f"names checks that are not in `grading.checks`: {', '.join(unknown)}; "
                "fix the check id or add the check"
            )
        return levels

    @field_validator("ablations")
    @classmethod
    def _ablations_name_graded_checks(
        cls, ablations: list[Ablation], info: ValidationInfo
    ) -> list[Ablation]:
        grading: ExerciseSpec | None = info.data.get("grading")
        if grading is None:  # reported already
            return ablations
        problems = []
        seen: set[str] = set()
        for ablation in ablations:
            if ablation.id in seen:
                problems.append(f"the ablation id {ablation.id!r} is used twice")
            seen.add(ablation.id)
            if ablation.fails not in grading.checks:
                problems.append(
                    f"ablation {ablation.id!r} names the check {ablation.fails!r}, which is not "
                    "in `grading.checks`"
                )
            if ablation.launch is not None and ablation.launch >= grading.launch_count():
                problems.append(
                    f"ablation {ablation.id!r} names launch {ablation.launch}; the exercise "
                    f"makes {grading.launch_count()} (0 to {grading.launch_count() - 1})"
                )
        if problems:
            raise ValueError("; ".join(problems))
        return ablations


class Concept(_Strict):
    """An idea the coach explains when a learner asks about it: the words that name it in each
    language, a short answer written for the coach (2 to 5 sentences that explain, not an
    excerpt of a step), and the steps of this lesson that teach it (checked by
    app/content/conceptcheck.py)."""

    id: Slug
    terms: dict[str, list[str]] = Field(
        description="Per locale (en, tr, pt-BR), the words learners use for it: the glossary's "
        "term first, then other names and API names"
    )
    answer: Text = Field(description="2 to 5 sentences, Markdown, in every locale")
    steps: list[Slug] = Field(min_length=1, description="The steps of this lesson that teach it")
    check: Text | None = Field(None, description="Optional: a question to check yourself")


CardKind = Literal["step", "question", "exercise"]
CARD_KINDS: tuple[CardKind, ...] = ("step", "question", "exercise")


class SequenceItem(_Strict):
    """One card of the lesson's sequence: the id of a step, a quiz question or an exercise."""

    step: Slug | None = Field(None, description="The id of a step of `steps`")
    question: Slug | None = Field(None, description="The id of a question of `quiz`")
    exercise: Slug | None = Field(None, description="The id of an exercise of `exercises`")

    @model_validator(mode="after")
    def _exactly_one(self) -> SequenceItem:
        named = [kind for kind in CARD_KINDS if getattr(self, kind) is not None]
        if len(named) != 1:
            raise ValueError(
                "each entry names exactly one card: `step: <id>`, `question: <id>` or "
                "`exercise: <id>`"
            )
        return self

    @property
    def card(self) -> tuple[CardKind, str]:
        kind = next(kind for kind in CARD_KINDS if getattr(self, kind) is not None)
        return kind, getattr(self, kind)


class Lesson(_Strict):
    id: Slug
    title: Text
    summary: Text
    duration_minutes: int = Field(ge=1, le=240)
    steps: list[Step] = Field(min_length=1, max_length=40)
    quiz: list[QuizQuestion] = Field(default_factory=list)
    exercises: list[Exercise] = Field(default_factory=list)
    concepts: list[Concept] = Field(
        default_factory=list, description="What the coach explains when asked (a concept each)"
    )
    sequence: list[SequenceItem] | None = Field(
        None,
        description="The order the learner meets the cards in: steps, questions and exercises "
        "interleaved, each listed once by id. Without it: the steps, then the quiz, then the "
        "exercises.",
    )

    def cards(self) -> list[tuple[CardKind, str]]:
        """Every card in the learner's order: (kind, id)."""
        if self.sequence is not None:
            return [item.card for item in self.sequence]
        return [
            *(("step", step.id) for step in self.steps),
            *(("question", question.id) for question in self.quiz),
            *(("exercise", exercise.id) for exercise in self.exercises),
        ]


class FaqEntry(_Strict):
    id: Slug
    question: Text
    answer: Text = Field(description="Markdown")


class Course(_Strict):
    id: Slug
    title: Text
    summary: Text
    lessons: list[Slug] = Field(min_length=1, description="Lesson ids, in teaching order")
    faq: list[FaqEntry] = Field(default_factory=list)


def json_schema(kind: str) -> dict[str, object]:
    model = Lesson if kind == "lesson" else Course
    schema = model.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "Rendezvous lesson.yaml" if kind == "lesson" else "Rendezvous course.yaml"
    return schema
