"""The coach's quality set (tests/coach/quality/cases.yaml) answered through the model path, by a
real OpenAI-compatible server (vLLM, llama.cpp's server, Ollama, a hosted API):

    RDV_COACH_BENCH_URL=http://127.0.0.1:8080/v1 [RDV_COACH_BENCH_MODEL=...] \
    [RDV_COACH_BENCH_KEY=...] python -m benchmarks coach_quality [--timeout=60]

Prints, for the model and for the built-in coach on the same cases: the share of the cases that
hold, how many answers came from the model (the others fell back to the built-in coach: a time
limit passed, solution code or another language refused), and the median and slowest answer time,
beside the load average. Skipped (exit 0) when RDV_COACH_BENCH_URL is not set: nothing is
downloaded or started here.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from pydantic import SecretStr


def main(argv: list[str]) -> int:
    url = os.environ.get("RDV_COACH_BENCH_URL")
    if not url:
        print("skipped: set RDV_COACH_BENCH_URL to an OpenAI-compatible server to run it")
        return 0
    timeout = float(next((a.split("=", 1)[1] for a in argv if a.startswith("--timeout=")), 60))
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    key = os.environ.get("RDV_COACH_BENCH_KEY")
    model = {
        "coach_url": url,
        "coach_model": os.environ.get("RDV_COACH_BENCH_MODEL", "default"),
        "coach_api_key": SecretStr(key) if key else None,
        "coach_timeout_seconds": timeout,
    }
    with tempfile.TemporaryDirectory() as folder:
        database = f"sqlite:///{Path(folder) / 'coach-bench.db'}"
        for name, settings in (("model", model), ("built-in", {"coach_url": None})):
            print(_run(database, name, settings))
    return 0


def _run(database: str, name: str, settings: dict[str, Any]) -> str:
    from fastapi.testclient import TestClient
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    from app.config import get_settings
    from app.db import get_engine, get_sessionmaker
    from app.main import create_app
    from app.migrate import upgrade
    from tests.auth.factories import bearer, create_token, create_user
    from tests.coach.quality.judge import ask, load_cases, stored_run

    os.environ["RDV_DATABASE_URL"] = database
    for cached in (get_settings, get_engine, get_sessionmaker):
        cached.cache_clear()
    upgrade(database)
    engine = create_engine(database)
    app = create_app()
    app.state.settings = app.state.settings.model_copy(
        update={**settings, "coach_questions_per_hour": 10_000}
    )
    judged, seconds = [], []
    with TestClient(app) as client:
        for case in load_cases():
            with Session(engine) as session, session.begin():
                learner = create_user(session, name=case.id)
                headers = bearer(create_token(session, learner))
                learner_id = learner.id

            def post(url: str, body: dict[str, Any]) -> tuple[int, str, dict[str, Any]]:
                started = time.monotonic()
                answered = client.post(url, json=body, headers=headers)  # noqa: B023
                seconds.append(time.monotonic() - started)
                language = answered.headers.get("content-language", "")
                return answered.status_code, language, answered.json()

            def submit(run: str) -> uuid.UUID:
                submission = stored_run(run, learner_id)  # noqa: B023
                submission_id = submission.id
                with Session(engine) as session, session.begin():
                    session.add(submission)
                return submission_id

            judged.append(ask(case, post, submit))
    engine.dispose()
    held = sum(1 for item in judged if item.holds)
    by_model = sum(1 for item in judged if item.provider == "llm")
    return (
        f"{name}: {held} of {len(judged)} cases hold ({held / len(judged):.0%}); "
        f"{by_model} answered by the model; answer time median {statistics.median(seconds):.2f} s, "
        f"slowest {max(seconds):.2f} s; missed: {[i.case.id for i in judged if not i.holds]}"
    )
