"""`python -m grader grade --exercise ddp-fundamentals/train FILE [--json] [--sandbox NAME]`.

Exit status: 0 pass, 1 fail, 3 error (the platform failed), 2 usage.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path

from pydantic import ValidationError

from grader.contract import GradeEvent, Job, Result
from grader.exercises import UnknownExercise, load_spec
from grader.i18n import LOCALES, localize_result

EXIT = {"pass": 0, "fail": 1, "error": 3}
MARK = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP"}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m grader", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("grade", help="grade one program")
    g.add_argument("file", type=Path, help="the learner's program (run as main.py)")
    g.add_argument("--exercise", required=True, help="e.g. ddp-fundamentals/train")
    g.add_argument("--json", action="store_true", help="print the Result as JSON")
    g.add_argument("--sandbox", choices=["bwrap", "docker", "none"], default=None)
    g.add_argument("--lessons", type=Path, default=None, help="the lessons directory")
    g.add_argument(
        "--locale",
        choices=LOCALES,
        default="en",
        help="the language of the report and of the Result's texts (" + ", ".join(LOCALES) + ")",
    )
    g.add_argument("--quiet", action="store_true", help="do not stream the ranks' output")
    return parser


def render(result: Result) -> str:
    lines = [f"{result.status.upper()}: {result.summary}"]
    if result.launch:
        la = result.launch
        lines.append(
            f"  ({la.world_size} rank{'s' if la.world_size != 1 else ''}, {la.backend} on "
            f"{la.device}, sandbox {la.sandbox}; "
            f"{result.timings_ms.total / 1000:.1f} s)"
        )
    if result.error:
        lines.append(f"  error: {result.error}")
    for c in result.checks:
        where = (
            f" [rank {c.rank}" + (f", line {c.line}]" if c.line else "]")
            if c.rank is not None
            else ""
        )
        lines.append(f"{MARK[c.status]}  {c.id}: {c.title}{where}")
        if c.message:
            lines.append(f"      {c.message}")
        if c.hint:
            lines.append(f"      hint: {c.hint}")
    for r in result.ranks:
        if r.stack and result.status == "fail":
            lines.append(f"--- rank {r.rank} stack when stopped ---\n{r.stack.strip()}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        code = args.file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"Cannot read {args.file}: {exc}", file=sys.stderr)
        return 2
    try:
        spec = load_spec(args.exercise, args.lessons)
        job = Job(
            exercise=args.exercise,
            code=code,
            spec=spec,
            submission_id=f"cli-{uuid.uuid4().hex[:8]}",
            locale=args.locale,
        )
    except UnknownExercise as exc:
        print(f"{exc}. Check the exercise id (e.g. ddp-fundamentals/train).", file=sys.stderr)
        return 2
    except ValidationError as exc:
        print(f"Cannot grade this: {exc.errors()[0]['msg']}", file=sys.stderr)
        return 2

    def on_event(event: GradeEvent) -> None:
        if event.kind == "output" and not args.quiet and not args.json:
            print(f"[rank {event.rank}] {event.data.get('line', '')}", file=sys.stderr, flush=True)

    from grader.api import grade
    from grader.sandbox.pool import open_pool

    # The pool prepares the grading's next launches while one runs; closed with the command.
    pool = open_pool()
    try:
        result = grade(job, on_event=on_event, sandbox=args.sandbox, pool=pool)
    finally:
        if pool is not None:
            pool.close()
    if args.locale != "en":
        shown = localize_result(result.model_dump(mode="json"), args.locale, spec.hints)
        result = Result.model_validate(shown)
    print(result.model_dump_json(indent=2) if args.json else render(result))
    return EXIT[result.status]
