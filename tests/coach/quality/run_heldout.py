"""Ask the held-out quality set (heldout.yaml) through the coach's API and write every answer to
a file, for a person to judge (heldout-verdicts.md). Not a test: nothing here judges.

    .venv/bin/python -m tests.coach.quality.run_heldout [--out DIR] [--regrade]

The app runs in a test client on a fresh SQLite database (migrated in a temporary folder),
with the built-in coach (no model server). Each case is asked by a learner of its own: the
case's `before` questions first, then its question, about its submission when it has one.
A case's submission is either a stored run (tests/coach/runs/<run>, exercise
ddp-fundamentals/train) or a program of heldout_programs/, graded for real with
`python -m grader grade --json` the first time (about 5 CPU-seconds per launch) and cached in
heldout_runs/<program>/result.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

HERE = Path(__file__).parent
CASES = HERE / "heldout.yaml"
PROGRAMS = HERE / "heldout_programs"
GRADED = HERE / "heldout_runs"
STORED_RUNS = HERE.parent / "runs"
GOLDEN = HERE.parent.parent / "grader" / "cases"
STORED_EXERCISE = "ddp-fundamentals/train"
ROOT = HERE.parent.parent.parent


@dataclass(frozen=True)
class Case:
    id: str
    lang: str
    page: str
    kind: str
    lesson: str
    question: str
    expect: str
    exercise: str | None = None
    step: str | None = None
    run: str | None = None
    program: str | None = None
    check: str | None = None
    before: list[str] = field(default_factory=list)


def load_cases() -> list[Case]:
    raw = YAML(typ="safe").load(CASES.read_text(encoding="utf-8"))
    return [Case(**item) for item in raw]


def graded_program(program: str, exercise: str, regrade: bool) -> dict[str, Any]:
    """The Result of a held-out program (graded once, then cached)."""
    cached = GRADED / Path(program).stem / "result.json"
    if cached.exists() and not regrade:
        return dict(json.loads(cached.read_text()))
    print(f"grading {program} as {exercise} ...", file=sys.stderr, flush=True)
    done = subprocess.run(
        [
            *(sys.executable, "-m", "grader", "grade", "--exercise", exercise),
            *("--json", "--quiet", str(PROGRAMS / program)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    result = dict(json.loads(done.stdout))
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    return result


def submission_of(case: Case, regrade: bool) -> tuple[str, str, dict[str, Any]] | None:
    """(exercise, code, Result) of the case's submission, if it has one."""
    if case.run:
        code = (GOLDEN / case.run / "main.py").read_text()
        result = json.loads((STORED_RUNS / case.run / "result.json").read_text())
        return STORED_EXERCISE, code, result
    if case.program:
        assert case.exercise, case.id
        code = (PROGRAMS / case.program).read_text()
        return case.exercise, code, graded_program(case.program, case.exercise, regrade)
    return None


@contextmanager
def coach_client() -> Iterator[tuple[Any, Any]]:
    """(TestClient, Session) of the app on a fresh, migrated SQLite database."""
    os.environ.setdefault("RDV_ENVIRONMENT", "test")
    os.environ.setdefault("RDV_WARM_POOL", "0")
    from fastapi.testclient import TestClient
    from sqlalchemy.orm import Session

    from app.db import get_session, make_engine
    from app.main import create_app
    from app.migrate import upgrade

    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/heldout.db"
        upgrade(url)
        engine = make_engine(url)
        session = Session(bind=engine, expire_on_commit=False)
        application = create_app()

        def _session() -> Iterator[Session]:
            yield session
            session.flush()

        @contextmanager
        def _unit_of_work() -> Iterator[Session]:
            yield session

        application.dependency_overrides[get_session] = _session
        application.state.unit_of_work = _unit_of_work
        application.state.settings = application.state.settings.model_copy(
            update={"coach_questions_per_hour": 1000}
        )
        try:
            with TestClient(application) as client:
                yield client, session
        finally:
            session.close()
            engine.dispose()


def ask_all(cases: list[Case], out: Path, regrade: bool) -> list[dict[str, Any]]:
    from app.submissions.models import DONE, Submission
    from tests.auth.factories import bearer, create_token, create_user

    answers = []
    with coach_client() as (client, session):
        for case in cases:
            learner = create_user(session, name=case.id)
            headers = bearer(create_token(session, learner))
            body: dict[str, Any] = {"question": case.question, "lesson_id": case.lesson}
            if case.step:
                body["step_id"] = case.step
            submitted = submission_of(case, regrade)
            if submitted is not None:
                exercise, code, result = submitted
                submission = Submission(
                    id=uuid.uuid4(),
                    user_id=learner.id,
                    exercise=exercise,
                    code=code,
                    status=DONE,
                    result=result,
                    created_at=datetime.now(UTC),
                )
                session.add(submission)
                session.flush()
                body["submission_id"] = str(submission.id)
                if case.check:
                    body["check_id"] = case.check
            elif case.exercise:
                body["exercise"] = case.exercise
            url = f"/api/v1/coach?locale={case.page}"
            earlier = []
            for question in case.before:
                reply = client.post(url, json={**body, "question": question}, headers=headers)
                earlier.append({"question": question, "answer": _text(reply)})
            reply = client.post(url, json=body, headers=headers)
            payload = (
                reply.json()
                if reply.headers.get("content-type", "").startswith("application/json")
                else {}
            )
            record = {
                "id": case.id,
                "lang": case.lang,
                "kind": case.kind,
                "question": case.question,
                "status": reply.status_code,
                "content_language": reply.headers.get("content-language", ""),
                "answer": _text(reply),
                "provider": payload.get("provider"),
                "sources": [s.get("step_id") for s in payload.get("sources") or []],
                "before": earlier,
                "expect": case.expect,
            }
            answers.append(record)
            (out / f"{case.id}.md").write_text(_markdown(record), encoding="utf-8")
            print(f"{case.id}: {reply.status_code}", file=sys.stderr, flush=True)
    return answers


def _text(reply: Any) -> str:
    try:
        return str(reply.json().get("answer", reply.text))
    except ValueError:
        return str(reply.text)


def _markdown(record: dict[str, Any]) -> str:
    lines = [f"## {record['id']} ({record['lang']}, {record['kind']})", ""]
    for earlier in record["before"]:
        lines += [f"**Asked first:** {earlier['question']}", "", "> " + _quote(earlier["answer"])]
        lines.append("")
    lines += [f"**Question:** {record['question']}", ""]
    lines += [
        f"**Answer** (HTTP {record['status']}, {record['content_language']}, "
        f"provider {record['provider']}, links {record['sources']}):",
        "",
        "> " + _quote(record["answer"]),
        "",
        f"**A helpful answer must:** {record['expect']}",
        "",
    ]
    return "\n".join(lines)


def _quote(text: str) -> str:
    return text.replace("\n", "\n> ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "heldout")
    parser.add_argument("--only", nargs="*", default=None, help="case ids to ask")
    parser.add_argument("--regrade", action="store_true", help="grade the programs again")
    parser.add_argument("--grade-only", action="store_true", help="grade, ask nothing")
    args = parser.parse_args()
    cases = [case for case in load_cases() if not args.only or case.id in args.only]
    if args.grade_only:
        for case in cases:
            submission_of(case, args.regrade)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    answers = ask_all(cases, args.out, args.regrade)
    (args.out / "answers.json").write_text(json.dumps(answers, indent=1, ensure_ascii=False))
    (args.out / "answers.md").write_text(
        "\n".join(_markdown(record) for record in answers), encoding="utf-8"
    )
    print(f"{len(answers)} answers in {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
