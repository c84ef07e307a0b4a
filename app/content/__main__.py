"""`python -m app.content validate | schema | new-exercise | check-exercise`: check the lesson
files (and list stale translations), export the JSON Schema, scaffold an exercise, grade an
exercise's solution, starter and ablations."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.config import get_settings
from app.content import authoring, staleness, starters
from app.content.loader import Catalog, display_path, load_catalog
from app.content.schemas import json_schema


def validate(
    lessons_dir: Path, update: bool = False, accept: tuple[str, ...] = (), strict: bool = False
) -> int:
    """Exit 1 on any problem (the lesson is left out when served); with `strict`, on any warning
    too (a text missing in a supported locale, which is shown in English meanwhile)."""
    catalog = load_catalog(lessons_dir)
    for problem in (*catalog.problems, *catalog.warnings):
        print(problem)
    if update:
        _update_stamps(catalog, frozenset(accept))
        catalog = load_catalog(lessons_dir)
    stale = _list_stale(catalog)
    exercises = sum(len(item.lesson.exercises) for item in catalog.ordered)
    summary = (
        f"{display_path(lessons_dir)}: {len(catalog.lessons)} lessons, {exercises} exercises, "
        f"{len(catalog.problems)} problems, {len(catalog.warnings)} warnings, "
        f"{stale} stale translations"
    )
    print(summary, file=sys.stderr)
    return 1 if catalog.problems or (strict and catalog.warnings) else 0


def _list_stale(catalog: Catalog) -> int:
    """Print each stale translation (not a problem: the page shows the English meanwhile)."""
    count = 0
    for loaded in catalog.ordered:
        for locale, paths in sorted(loaded.stale.items()):
            for path in sorted(paths):
                count += 1
                print(
                    f"{display_path(loaded.file)}: {path}: the {locale} translation is stale: "
                    "the English changed since it was translated (translate it again, or run "
                    f"validate --update --accept {loaded.id}:{path} if it still says the same)"
                )
    return count


def _update_stamps(catalog: Catalog, accept: frozenset[str]) -> None:
    for loaded in catalog.ordered:
        prefix = f"{loaded.id}:"
        mine = frozenset(item[len(prefix) :] for item in accept if item.startswith(prefix))
        old = staleness.read(loaded.directory)
        stamps = staleness.updated(loaded.lesson, old, mine)
        for exercise in loaded.lesson.exercises:  # the translated starters (starters.py)
            path = starters.field_path(exercise.id)
            found = starters.read_translations(loaded.exercise_dir(exercise.id))
            english = loaded.starter_code[exercise.id]
            stamp = starters.updated_stamps(old, exercise.id, english, found, path in mine)
            if stamp:
                stamps[path] = stamp
        if staleness.write(loaded.directory, stamps):
            print(f"{display_path(loaded.directory / staleness.SIDECAR)}: updated", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.content", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("validate", help="check every lesson file; exit 1 on any problem")
    check.add_argument("--lessons-dir", type=Path, default=None)
    check.add_argument(
        "--update",
        action="store_true",
        help=f"record which English each translation was made from ({staleness.SIDECAR})",
    )
    check.add_argument(
        "--accept",
        action="append",
        default=[],
        metavar="LESSON:FIELD",
        help="with --update: a stale translation still says the same (re-stamp it)",
    )
    check.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 on warnings too: a text missing in a supported locale (CI for the shipped "
        "locales; without it a partial new language keeps every lesson online)",
    )
    export = sub.add_parser("schema", help="write the JSON Schema of lesson.yaml or course.yaml")
    export.add_argument("-o", "--output", type=Path, default=None, help="file (default: stdout)")
    export.add_argument("--for", dest="kind", choices=("lesson", "course"), default="lesson")
    authoring.add_commands(sub)
    args = parser.parse_args(argv)

    lessons_dir = getattr(args, "lessons_dir", None) or Path(get_settings().lessons_dir)
    if args.command == "validate":
        return validate(lessons_dir, args.update, tuple(args.accept), args.strict)
    if args.command in authoring.COMMANDS:
        return authoring.run(args, lessons_dir)
    text = json.dumps(json_schema(args.kind), indent=2, ensure_ascii=False) + "\n"
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
