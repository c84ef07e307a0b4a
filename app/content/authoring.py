"""Authoring commands: `new-exercise LESSON ID` scaffolds an exercise (its entry in
lesson.yaml, a starter and a solution) and `check-exercise ID` grades its solution (must pass)
and its starter (must fail) and each ablation (must fail with its check), and lists the texts
each language still lacks. docs/authoring.md
walks an author through both.

Grading goes through the app's grading seam (`app.submissions.backends.real_grade`, what the
in-process backend runs), with the spec read from the lesson file, so an exercise is judged
here exactly as a learner's submission would be.
"""

from __future__ import annotations

import argparse
import re
import sys
import uuid
from pathlib import Path

from app.content import staleness
from app.content.ablations import EditDoesNotApply, ablated, graded_spec
from app.content.loader import (
    LESSON_FILE,
    LoadedLesson,
    Problem,
    display_path,
    load_lesson,
    parse_model,
)
from app.content.schemas import SLUG_PATTERN, Lesson
from grader.contract import ExerciseSpec, Job, Result
from grader.i18n import LOCALES as SUPPORTED_LOCALES

COMMANDS = ("new-exercise", "check-exercise")
LOCALES = SUPPORTED_LOCALES

STARTER = '''"""{title}: the learner starts from this file. Run it with
torchrun --nproc-per-node=2 main.py"""

import os

import torch
import torch.distributed as dist


def main() -> None:
    # TODO: join the process group (the backend that fits the machine), then do the work
    rank = int(os.environ.get("RANK", 0))
    print(f"rank {{rank}}: tensor {{torch.ones(1).item()}}")


if __name__ == "__main__":
    main()
'''

SOLUTION = '''"""{title}: the reference solution (never shown to learners; it must pass)."""

import os

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
    try:
        rank = dist.get_rank()
        total = torch.ones(1)
        dist.all_reduce(total)
        print(f"rank {{rank}} of {{dist.get_world_size()}}: {{total.item()}}")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    assert "RANK" in os.environ, "run me with torchrun"
    main()
'''

ENTRY = """  - id: {slug}
    title:
      en: {title}
    prompt:
      en: |
        TODO: say what the learner must make the program do, and how it is judged.
    grading:
      checks: [run.completed, dist.init, dist.cleanup]
      launch:
        world_sizes: [2, 1]
      limits:
        wall_seconds: 120
    hint_levels:
{hints}"""

HINTS = """      {check}:
        nudge:
          en: "TODO: a question that points at what to look at when {check} fails"
        pointer:
          en: "TODO: which call or idea is wrong"
        fix:
          en: "TODO: what to change on the learner's own line"
"""
SCAFFOLD_CHECKS = ("run.completed", "dist.init", "dist.cleanup")


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    new = sub.add_parser("new-exercise", help="scaffold an exercise: lesson.yaml entry, files")
    new.add_argument("lesson", help="the lesson id, e.g. ddp-fundamentals")
    new.add_argument("id", help="the exercise id inside the lesson, e.g. all-gather")
    new.add_argument("--lessons-dir", type=Path, default=None)
    check = sub.add_parser(
        "check-exercise",
        help="grade the solution (must pass), the starter and the ablations (must fail)",
    )
    check.add_argument("id", help="the full exercise id, e.g. ddp-fundamentals/all-gather")
    check.add_argument("--lessons-dir", type=Path, default=None)


def run(args: argparse.Namespace, lessons_dir: Path) -> int:
    if args.command == "new-exercise":
        return new_exercise(lessons_dir, args.lesson, args.id)
    return check_exercise(lessons_dir, args.id)


def _lesson_dir(lessons_dir: Path, lesson_id: str) -> Path | None:
    found = sorted(lessons_dir.glob(f"[0-9][0-9]-{lesson_id}/{LESSON_FILE}"))
    return found[0].parent if found else None


def new_exercise(lessons_dir: Path, lesson_id: str, slug: str) -> int:
    """Write exercises/<id>/{starter,solution}.py and append the entry to lesson.yaml."""
    directory = _lesson_dir(lessons_dir, lesson_id)
    if directory is None:
        print(f"There is no lesson {lesson_id!r} in {display_path(lessons_dir)}.", file=sys.stderr)
        return 2
    if not re.fullmatch(SLUG_PATTERN, slug) or len(slug) > 64:
        print(f"{slug!r} is not an id: use lower-case words joined by -.", file=sys.stderr)
        return 2
    folder = directory / "exercises" / slug
    lesson_file = directory / LESSON_FILE
    text = lesson_file.read_text(encoding="utf-8")
    if folder.exists() or re.search(rf"^\s*- id: {re.escape(slug)}\s*$", text, re.M):
        print(f"{lesson_id}/{slug} exists already; pick another id.", file=sys.stderr)
        return 2
    title = slug.replace("-", " ").capitalize()
    hints = "".join(HINTS.format(check=check) for check in SCAFFOLD_CHECKS)
    entry = ENTRY.format(slug=slug, title=title, hints=hints)
    folder.mkdir(parents=True)
    (folder / "starter.py").write_text(STARTER.format(title=title), encoding="utf-8")
    (folder / "solution.py").write_text(SOLUTION.format(title=title), encoding="utf-8")
    text, in_sequence = _add_to_sequence(text, slug)
    lesson_file.write_text(_add_exercise(text, entry), encoding="utf-8")
    print(f"{display_path(lesson_file)}: added exercise {lesson_id}/{slug}")
    if in_sequence:
        print(f"{display_path(lesson_file)}: added `- exercise: {slug}` at the end of `sequence:`")
    print(f"{display_path(folder)}/starter.py, solution.py: written")
    print(
        "Next: write the prompt and the title, choose the checks (docs/authoring.md), make the "
        f"solution pass and the starter fail, then: python -m app.content check-exercise "
        f"{lesson_id}/{slug}"
    )
    return 0


def _add_exercise(text: str, entry: str) -> str:
    """The lesson's text with `entry` as the last item of its `exercises:` block (before the next
    top-level key, such as `concepts:`, and the comments above that key), or with a new block at
    the end."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    start = next((i for i, line in enumerate(lines) if re.match(r"exercises:\s*$", line)), None)
    if start is None:
        return "".join(lines) + "exercises:\n" + entry
    end = next(
        (i for i in range(start + 1, len(lines)) if re.match(r"[a-z_]+:", lines[i])), len(lines)
    )
    while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].startswith("#")):
        end -= 1  # the blank lines and comments that belong to the next key stay with it
    return "".join(lines[:end]) + entry + "".join(lines[end:])


def _add_to_sequence(text: str, slug: str) -> tuple[str, bool]:
    """The lesson's text with `- exercise: <slug>` after the last item of its `sequence:` (a
    lesson with a sequence must name every exercise in it, or `validate` takes it offline);
    unchanged, False, when the lesson has no block-style sequence."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if re.match(r"sequence:\s*$", line)), None)
    if start is None:
        return text, False
    last, indent = None, "  "  # the block's last line; its items' indentation
    for index in range(start + 1, len(lines)):
        line = lines[index]
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace() and not line.startswith("- "):
            break
        if last is None:
            indent = line[: len(line) - len(line.lstrip())]
        last = index
    if last is None:
        return text, False
    ending = "" if lines[last].endswith("\n") else "\n"
    lines.insert(last + 1, f"{ending}{indent}- exercise: {slug}\n")
    return "".join(lines), True


def _find(lessons_dir: Path, exercise_id: str) -> tuple[LoadedLesson, str, list[Problem]] | None:
    """The exercise's lesson, with its problems: a lesson that `validate` refuses (untranslated
    hint levels, say) is still read when its model parses, so the author can grade first and
    translate after."""
    lesson_id, _, slug = exercise_id.partition("/")
    directory = _lesson_dir(lessons_dir, lesson_id)
    if directory is None:
        return None
    loaded, problems = load_lesson(directory)
    if loaded is None:
        lesson = parse_model(Lesson, directory / LESSON_FILE)[0]
        if lesson is None:
            return None
        number = int(directory.name[:2])
        stale = staleness.stale_fields(lesson, staleness.read(directory))
        loaded = LoadedLesson(lesson, number, directory, directory / LESSON_FILE, {}, stale)
    if all(item.id != slug for item in loaded.lesson.exercises):
        return None
    return loaded, slug, problems


def _grade(loaded: LoadedLesson, slug: str, code: str, spec: ExerciseSpec | None = None) -> Result:
    from app.submissions.backends import real_grade  # the grading seam the app's backend uses

    exercise = next(item for item in loaded.lesson.exercises if item.id == slug)
    job = Job(
        exercise=f"{loaded.id}/{slug}",
        code=code,
        spec=spec or exercise.grading,
        submission_id=f"check-exercise-{uuid.uuid4().hex[:8]}",
    )
    return real_grade(job)


def _failed(result: Result) -> str:
    return ", ".join(check.id for check in result.checks if check.status == "fail") or "none"


def missing_texts(loaded: LoadedLesson, slug: str) -> dict[str, list[str]]:
    """locale -> the exercise's fields with no translation there, or a stale one."""
    exercise = next(item for item in loaded.lesson.exercises if item.id == slug)
    missing: dict[str, list[str]] = {locale: [] for locale in staleness.TRANSLATED_LOCALES}
    for path, text in staleness.text_fields(exercise, f"exercises.{slug}"):
        for locale in missing:
            if text.get(locale) is None:
                missing[locale].append(path)
            elif path in loaded.stale.get(locale, ()):
                missing[locale].append(f"{path} (stale)")
    return missing


def check_exercise(lessons_dir: Path, exercise_id: str) -> int:
    """Exit 0: the solution passed, the starter failed and the lesson validates (warnings, such
    as untranslated hint levels, are listed and do not count); 1: any of these did not; 3: the
    grader itself failed (a platform error); 2: no such exercise."""
    found = _find(lessons_dir, exercise_id)
    if found is None:
        print(
            f"No exercise {exercise_id!r} in {display_path(lessons_dir)} (an id is "
            "<lesson id>/<exercise id>; `python -m app.content validate` shows a lesson file "
            "that does not parse).",
            file=sys.stderr,
        )
        return 2
    loaded, slug, problems = found
    status = 0
    for file, wanted in (("solution.py", "pass"), ("starter.py", "fail")):
        print(f"{exercise_id}: grading {file} ...", flush=True)
        code = (loaded.exercise_dir(slug) / file).read_text(encoding="utf-8")
        result = _grade(loaded, slug, code)
        if result.status == "error":
            print(f"  the grader failed (not the program): {result.error}")
            return 3
        verdict = f"{result.status}: {result.summary}"
        if result.status == "fail":
            verdict += f" (failed checks: {_failed(result)})"
        ok = result.status == wanted
        print(f"  {verdict}: {'as it must' if ok else f'it must {wanted}'}")
        status = status or (0 if ok else 1)
    ablations = check_ablations(loaded, slug, exercise_id)
    if ablations == 3:
        return 3
    status = status or ablations
    for locale, paths in missing_texts(loaded, slug).items():
        print(f"{exercise_id}: texts missing in {locale}: {len(paths) or 'none'}")
        for path in paths:
            print(f"  {path}")
    refusals = [problem for problem in problems if not problem.warning]
    warnings = [problem for problem in problems if problem.warning]
    if warnings:
        print(f"{exercise_id}: warnings (the lesson stays online; `validate --strict` fails):")
        for problem in warnings:
            print(f"  {problem}")
    if refusals:
        print(f"{exercise_id}: not ready: `validate` refuses the lesson until these are fixed:")
        for problem in refusals:
            print(f"  {problem}")
    return status or (1 if refusals else 0)


def check_ablations(loaded: LoadedLesson, slug: str, exercise_id: str) -> int:
    """Grade each ablation of the exercise (the solution with its edits, at its launch): each
    must fail with its named check. 0: all did; 1: one did not (or does not apply); 3: the
    grader itself failed."""
    exercise = next(item for item in loaded.lesson.exercises if item.id == slug)
    solution = (loaded.exercise_dir(slug) / "solution.py").read_text(encoding="utf-8")
    status = 0
    for ablation in exercise.ablations:
        where = "" if ablation.launch is None else f" at launch {ablation.launch}"
        print(f"{exercise_id}: grading ablation {ablation.id}{where} ...", flush=True)
        try:
            code = ablated(solution, ablation)
        except (EditDoesNotApply, ValueError) as exc:
            print(f"  does not apply: {exc}")
            status = 1
            continue
        result = _grade(loaded, slug, code, graded_spec(exercise.grading, ablation))
        if result.status == "error":
            print(f"  the grader failed (not the program): {result.error}")
            return 3
        caught = any(c.id == ablation.fails and c.status == "fail" for c in result.checks)
        verdict = f"{result.status} (failed checks: {_failed(result)})"
        if result.status == "fail" and caught:
            print(f"  {verdict}: {ablation.fails} caught it, as it must")
        else:
            print(f"  {verdict}: it must fail {ablation.fails}")
            status = 1
    return status
