"""A learner driving the real HTTP API (`/api/v1`), as the mobile app does."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx

from grader.contract import Result

EXERCISE = "ddp-fundamentals/train"
FINISHED = ("done", "error")


class Learner:
    def __init__(self, base_url: str, name: str) -> None:
        self.http = httpx.Client(base_url=base_url, timeout=30)
        email = f"{name}-{uuid.uuid4().hex[:8]}@scale.test"
        password = f"pw-{uuid.uuid4().hex}"
        registered = self.http.post(
            "/api/v1/auth/register",
            json={"email": email, "password": password, "display_name": name},
        )
        registered.raise_for_status()
        token = self.http.post(
            "/api/v1/auth/token",
            data={"username": email, "password": password, "device_name": "scale-test"},
        )
        token.raise_for_status()
        self.http.headers["Authorization"] = f"Bearer {token.json()['access_token']}"

    def submit(self, code: str) -> str:
        response = self.http.post("/api/v1/submissions", json={"exercise": EXERCISE, "code": code})
        assert response.status_code == 202, response.text
        return str(response.json()["id"])

    def submission(self, submission_id: str) -> dict[str, Any]:
        response = self.http.get(f"/api/v1/submissions/{submission_id}")
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body

    def wait_for(
        self, submission_id: str, status: tuple[str, ...], timeout_s: float
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            body = self.submission(submission_id)
            if body["status"] in status:
                return body
            if time.monotonic() > deadline:
                raise TimeoutError(f"submission {submission_id} still {body['status']}")
            time.sleep(0.5)

    def result(self, submission_id: str, timeout_s: float = 600) -> Result:
        body = self.wait_for(submission_id, FINISHED, timeout_s)
        assert body["result"] is not None, body
        return Result.model_validate(body["result"])

    def exercise_attempts(self) -> int:
        """Graded attempts the learner's progress counts for the exercise."""
        response = self.http.get("/api/v1/progress")
        response.raise_for_status()
        lesson = response.json()["lessons"].get(EXERCISE.partition("/")[0]) or {}
        entry = (lesson.get("exercises") or {}).get(EXERCISE)
        return int(entry["attempts"]) if entry else 0
