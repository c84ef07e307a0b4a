"""`python -m app.content validate | schema`: check the lesson files, export the JSON Schema."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.config import get_settings
from app.content.loader import display_path, load_catalog
from app.content.schemas import json_schema


def validate(lessons_dir: Path) -> int:
    catalog = load_catalog(lessons_dir)
    for problem in catalog.problems:
        print(problem)
    exercises = sum(len(item.lesson.exercises) for item in catalog.ordered)
    summary = (
        f"{display_path(lessons_dir)}: {len(catalog.lessons)} lessons, {exercises} exercises, "
        f"{len(catalog.problems)} problems"
    )
    print(summary, file=sys.stderr)
    return 1 if catalog.problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.content", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("validate", help="check every lesson file; exit 1 on any problem")
    check.add_argument("--lessons-dir", type=Path, default=None)
    export = sub.add_parser("schema", help="write the JSON Schema of lesson.yaml or course.yaml")
    export.add_argument("-o", "--output", type=Path, default=None, help="file (default: stdout)")
    export.add_argument("--for", dest="kind", choices=("lesson", "course"), default="lesson")
    args = parser.parse_args(argv)

    if args.command == "validate":
        return validate(args.lessons_dir or Path(get_settings().lessons_dir))
    text = json.dumps(json_schema(args.kind), indent=2, ensure_ascii=False) + "\n"
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
