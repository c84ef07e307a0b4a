"""The submissions API: accept, read back, ownership, limits, idempotency, drafts (both DBs)."""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient
from httpx import Response
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.auth.models import User
from app.submissions import service
from app.submissions.backends import LocalBackend
from app.submissions.models import Submission
from grader.contract import MAX_CODE_BYTES

EXERCISE = "ddp-fundamentals/train"
CODE = "import torch.distributed as dist\nprint('hello')\n"


def submit(client: TestClient, headers: dict[str, str], **overrides: object) -> Response:
    body = {"exercise": EXERCISE, "code": CODE, **overrides}
    return client.post("/api/v1/submissions", json=body, headers=headers)


def test_submit_is_accepted_and_reads_back_queued(client: TestClient, auth: dict[str, str]) -> None:
    accepted = submit(client, auth)
    assert accepted.status_code == 202, accepted.text
    body = accepted.json()
    assert body["status"] == "queued"
    assert body["queue_position"] == 1
    assert body["events_url"] == f"/api/v1/submissions/{body['id']}/events"

    read = client.get(f"/api/v1/submissions/{body['id']}", headers=auth)
    assert read.status_code == 200
    public = read.json()
    assert public["id"] == body["id"]
    assert public["exercise"] == EXERCISE
    assert public["status"] == "queued"
    assert public["result"] is None


def test_another_learner_gets_404_not_403(
    client: TestClient, auth: dict[str, str], other_auth: dict[str, str]
) -> None:
    submission_id = submit(client, auth).json()["id"]
    url = f"/api/v1/submissions/{submission_id}"
    for path in (url, f"{url}/events"):
        probe = client.get(path, headers=other_auth)
        assert probe.status_code == 404
        assert probe.json()["code"] == "submission_not_found"
    # ...exactly what a made-up id gets.
    made_up = client.get(f"/api/v1/submissions/{uuid.uuid4()}", headers=other_auth)
    assert made_up.status_code == 404
    assert made_up.json()["code"] == "submission_not_found"
    listing = client.get("/api/v1/submissions", headers=other_auth).json()
    assert listing["submissions"] == []


def test_signed_out_submission_is_refused(client: TestClient) -> None:
    refused = submit(client, {})
    assert refused.status_code == 401
    assert refused.json()["code"] == "not_authenticated"


def test_double_click_with_one_idempotency_key_makes_one_submission(
    client: TestClient, auth: dict[str, str], session: Session
) -> None:
    headers = {**auth, "Idempotency-Key": "click-1"}
    first, second = submit(client, headers), submit(client, headers)
    assert first.status_code == second.status_code == 202
    assert first.json()["id"] == second.json()["id"]
    count = session.scalar(select(func.count()).select_from(Submission))
    assert count == 1

    reused = submit(client, headers, code=CODE + "# changed\n")
    assert reused.status_code == 409
    assert reused.json()["code"] == "idempotency_key_reused"


def test_code_over_64_kib_is_refused_with_a_clear_message(
    client: TestClient, auth: dict[str, str], session: Session
) -> None:
    too_big = "x = 1\n" * (MAX_CODE_BYTES // 6 + 10)
    refused = submit(client, auth, code=too_big)
    assert refused.status_code == 413
    body = refused.json()
    assert body["code"] == "code_too_large"
    assert "64 KiB" in body["message"] and "submit again" in body["message"]
    assert session.scalar(select(func.count()).select_from(Submission)) == 0
    # Exactly at the limit is fine.
    at_limit = "#" * (MAX_CODE_BYTES - 1) + "\n"
    assert submit(client, auth, code=at_limit).status_code == 202


def test_empty_code_is_refused(client: TestClient, auth: dict[str, str]) -> None:
    refused = submit(client, auth, code="   \n")
    assert refused.status_code == 422
    assert refused.json()["code"] == "invalid_request"
    assert "code" in refused.json()["message"]


def test_a_nul_byte_cannot_break_storage(
    client: TestClient, auth: dict[str, str], session: Session
) -> None:
    refused = submit(client, auth, code="print('a')\x00\n")
    assert refused.status_code == 422
    assert refused.json()["code"] == "invalid_request"
    assert session.scalar(select(func.count()).select_from(Submission)) == 0


def test_drafts_only_for_exercises_that_exist(client: TestClient, auth: dict[str, str]) -> None:
    refused = client.put("/api/v1/drafts/no-such/exercise", json={"code": "x"}, headers=auth)
    assert refused.status_code == 404
    assert refused.json()["code"] == "exercise_not_found"


def test_too_many_in_flight_gets_a_clear_message(client: TestClient, auth: dict[str, str]) -> None:
    limit = client.app.state.settings.max_submissions_in_flight  # type: ignore[attr-defined]
    for index in range(limit):
        assert submit(client, auth, code=f"{CODE}# {index}\n").status_code == 202
    refused = submit(client, auth, code=CODE + "# one more\n")
    assert refused.status_code == 429
    body = refused.json()
    assert body["code"] == "too_many_in_flight"
    assert "Wait for one to finish" in body["message"]


def test_unknown_exercise_is_404_with_its_name(client: TestClient, auth: dict[str, str]) -> None:
    refused = submit(client, auth, exercise="no-such/exercise")
    assert refused.status_code == 404
    assert refused.json()["code"] == "exercise_not_found"
    assert "no-such/exercise" in refused.json()["message"]


def test_error_messages_follow_the_locale(client: TestClient, auth: dict[str, str]) -> None:
    refused = client.post(
        "/api/v1/submissions?locale=tr",
        json={"exercise": "no-such/exercise", "code": CODE},
        headers=auth,
    )
    assert refused.status_code == 404
    assert refused.json()["code"] == "exercise_not_found"
    english = submit(client, auth, exercise="no-such/exercise").json()["message"]
    turkish = refused.json()["message"]
    assert "no-such/exercise" in turkish and turkish != english


def test_cookie_session_without_csrf_token_cannot_submit(client: TestClient) -> None:
    from tests.auth.factories import browser_sign_up

    token = browser_sign_up(client)
    refused = client.post(
        "/api/v1/submissions",
        json={"exercise": EXERCISE, "code": CODE},
        headers={"Origin": "http://testserver"},
    )
    assert refused.status_code == 403
    accepted = client.post(
        "/api/v1/submissions",
        json={"exercise": EXERCISE, "code": CODE},
        headers={"Origin": "http://testserver", "X-CSRF-Token": token},
    )
    assert accepted.status_code == 202, accepted.text


def test_listing_shows_own_submissions_newest_first(
    client: TestClient, auth: dict[str, str]
) -> None:
    first = submit(client, auth, code=CODE + "# 1\n").json()["id"]
    second = submit(client, auth, code=CODE + "# 2\n").json()["id"]
    listed = client.get("/api/v1/submissions", params={"exercise": EXERCISE}, headers=auth)
    assert [row["id"] for row in listed.json()["submissions"]] == [second, first]


@pytest.mark.parametrize("exercise", [EXERCISE])
def test_drafts_round_trip_and_stay_private(
    client: TestClient, auth: dict[str, str], other_auth: dict[str, str], exercise: str
) -> None:
    path = f"/api/v1/drafts/{exercise}"
    assert client.get(path, headers=auth).status_code == 404
    saved = client.put(path, json={"code": "print(1)\n"}, headers=auth)
    assert saved.status_code == 200, saved.text
    assert client.put(path, json={"code": "print(2)\n"}, headers=auth).status_code == 200
    read = client.get(path, headers=auth)
    assert read.json()["code"] == "print(2)\n"
    assert read.json()["exercise"] == exercise
    assert client.get(path, headers=other_auth).status_code == 404
    assert client.delete(path, headers=auth).status_code == 204
    assert client.get(path, headers=auth).status_code == 404


def test_a_draft_edited_from_a_stale_version_is_refused_not_overwritten(
    client: TestClient, auth: dict[str, str]
) -> None:
    """Two devices: the phone edited offline from version 1 while the laptop saved version 2."""
    path = f"/api/v1/drafts/{EXERCISE}"
    first = client.put(path, json={"code": "print(1)\n"}, headers=auth).json()
    laptop = client.put(
        path, json={"code": "print(2)\n", "base_updated_at": first["updated_at"]}, headers=auth
    )
    assert laptop.status_code == 200, laptop.text
    phone = client.put(
        path, json={"code": "print(3)\n", "base_updated_at": first["updated_at"]}, headers=auth
    )
    assert phone.status_code == 409, phone.text
    assert phone.json()["code"] == "draft_conflict"
    assert client.get(path, headers=auth).json()["code"] == "print(2)\n"  # nothing lost
    # Same code as the server holds: no conflict. Chosen "keep mine": saved from the new base.
    same = {"code": "print(2)\n", "base_updated_at": first["updated_at"]}
    assert client.put(path, json=same, headers=auth).status_code == 200
    latest = client.get(path, headers=auth).json()["updated_at"]
    mine = {"code": "print(3)\n", "base_updated_at": latest}
    assert client.put(path, json=mine, headers=auth).status_code == 200
    assert client.get(path, headers=auth).json()["code"] == "print(3)\n"
    # Without a base (older clients), a save is unconditional, as before.
    assert client.put(path, json={"code": "print(4)\n"}, headers=auth).status_code == 200


def test_the_editor_asks_for_a_draft_without_a_failed_request(
    client: TestClient, auth: dict[str, str]
) -> None:
    exercise = "ddp-fundamentals/train"
    path = f"/api/v1/drafts/{exercise}?missing=empty"
    empty = client.get(path, headers=auth)
    assert empty.status_code == 204 and empty.content == b""
    client.put(f"/api/v1/drafts/{exercise}", json={"code": "print(3)\n"}, headers=auth)
    assert client.get(path, headers=auth).json()["code"] == "print(3)\n"
    assert client.get(f"{path[:-5]}nope", headers=auth).status_code == 422


class HintedBackend(LocalBackend):
    """A local backend that records the grader hints the draft routes give it."""

    def __init__(self) -> None:
        super().__init__(lambda: None)  # type: ignore[arg-type,return-value]
        self.expected: list[str] = []

    def hint_exercise(self, exercise: str) -> None:
        self.expected.append(exercise)


def test_opening_or_editing_a_draft_tells_the_local_grader_which_exercise_comes(
    client: TestClient, auth: dict[str, str]
) -> None:
    backend = HintedBackend()
    client.app.state.grading_backend = backend  # type: ignore[attr-defined]
    try:
        path = f"/api/v1/drafts/{EXERCISE}"
        assert client.get(path, headers=auth).status_code == 404  # opened, nothing saved yet
        assert client.put(path, json={"code": "print(1)\n"}, headers=auth).status_code == 200
        refused = client.put(path, json={"code": "x" * (MAX_CODE_BYTES + 1)}, headers=auth)
        assert refused.status_code == 413
    finally:
        client.app.state.grading_backend = None  # type: ignore[attr-defined]
    assert backend.expected == [EXERCISE, EXERCISE]  # not for the draft it refused


def test_oversized_draft_is_refused(client: TestClient, auth: dict[str, str]) -> None:
    refused = client.put(
        f"/api/v1/drafts/{EXERCISE}", json={"code": "#" * (MAX_CODE_BYTES + 1)}, headers=auth
    )
    assert refused.status_code == 413
    assert refused.json()["code"] == "draft_too_large"


def test_history_pages_with_a_cursor(
    client: TestClient, auth: dict[str, str], session: Session, learner: User
) -> None:
    made = [
        service.submit(
            session,
            user_id=learner.id,
            exercise="ddp-fundamentals/train",
            code=f"print({index})\n",
            max_in_flight=10,
        ).submission.id
        for index in range(5)
    ]
    session.flush()
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        query = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        body = client.get("/api/v1/submissions", params=query, headers=auth).json()
        seen += [row["id"] for row in body["submissions"]]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert sorted(seen) == sorted(str(i) for i in made) and len(set(seen)) == 5
    bogus = client.get("/api/v1/submissions", params={"cursor": "bm90LWEtY3Vyc29y"}, headers=auth)
    assert bogus.status_code == 422 and bogus.json()["code"] == "invalid_request"
