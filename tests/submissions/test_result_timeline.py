"""The Result's timeline (grader/timeline/) reaches the mobile app as the grader wrote it: the
same JSON in `GET /api/v1/submissions/{id}`, in every viewer's language (it holds no text), and
in the stored events' `done` (both DBs)."""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.auth.models import User
from app.submissions import jobs, service
from tests.submissions.test_events import parse_sse
from tests.submissions.test_result_locale import EXERCISE, failed_result

pytestmark = pytest.mark.usefixtures("stream_sessions")

TIMELINE = {
    "version": 1,
    "clock": "ms",
    "steps_kept": {"first": 3, "last": 2},
    "launches": [
        {
            "launch": 1,
            "world_size": 2,
            "nnodes": 1,
            "role": "judged",
            "failing": True,
            "faulted": False,
            "timed_out": True,
            "duration_ms": 10250.5,
            "parted": {"n": 3, "op": "all_reduce", "line": 40, "made": [0], "missing": [1]},
            "lanes": [
                {
                    "rank": 0,
                    "node": 0,
                    "end": {"state": "waiting", "at": 10250.5, "line": 40},
                    "items": [
                        {
                            "kind": "collective",
                            "at": 812.5,
                            "op": "all_reduce",
                            "bytes": 4,
                            "line": 40,
                            "i": 3,
                            "step": 2,
                            "open": True,
                            "parted": True,
                        }
                    ],
                },
                {
                    "rank": 1,
                    "node": 0,
                    "end": {"state": "finished", "at": 900.0, "never_arrived": 3},
                    "items": [],
                },
            ],
        }
    ],
}


def graded_with_a_timeline(session: Session, learner: User) -> uuid.UUID:
    submitted = service.submit(
        session, user_id=learner.id, exercise=EXERCISE, code="print(1)\n", locale="en"
    )
    session.flush()
    claimed = jobs.claim(session, submitted.submission.id, "test-host:1:abc")
    assert claimed is not None
    result = failed_result()
    result.timeline = TIMELINE
    assert jobs.complete(session, claimed.id, result, attempt=1, owner=None)
    session.flush()
    return claimed.id


def test_the_api_gives_the_timeline_as_the_grader_wrote_it(
    client: TestClient, auth: dict[str, str], session: Session, learner: User
) -> None:
    submission_id = graded_with_a_timeline(session, learner)
    url = f"/api/v1/submissions/{submission_id}"
    for locale in ("en", "tr", "pt-BR"):
        result = client.get(url, headers=auth, params={"locale": locale}).json()["result"]
        assert result["version"] == 1
        assert result["timeline"] == TIMELINE, locale
    events = parse_sse(client.get(f"{url}/events", headers=auth).text)
    done = next(e["data"] for e in events if e["event"] == "done")
    assert isinstance(done, dict) and done["result"]["timeline"] == TIMELINE
