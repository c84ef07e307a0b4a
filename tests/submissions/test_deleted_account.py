"""Deleting an account while its event stream is open ends the stream cleanly (both DBs)."""

from __future__ import annotations

import logging

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete
from sqlalchemy.orm import Session

from app.auth.models import User
from app.submissions import service

pytestmark = pytest.mark.usefixtures("stream_sessions")


def test_an_open_stream_ends_with_signed_out_when_the_account_is_deleted(
    client: TestClient,
    auth: dict[str, str],
    session: Session,
    learner: User,
    caplog: pytest.LogCaptureFixture,
) -> None:
    queued = service.submit(
        session, user_id=learner.id, exercise="ddp-fundamentals/train", code="a"
    )
    session.flush()
    url = f"/api/v1/submissions/{queued.submission.id}/events"
    kinds: list[str] = []
    with caplog.at_level(logging.ERROR), client.stream("GET", url, headers=auth) as response:
        for line in response.iter_lines():
            if line.startswith("event:"):
                kinds.append(line.partition(":")[2].strip())
                if kinds == ["queued"]:  # the stream is open: now the account goes
                    session.execute(delete(User).where(User.id == learner.id))
                    session.expunge_all()
                    session.flush()
    assert kinds == ["queued", "signed_out"]
    assert "Traceback" not in caplog.text and "AssertionError" not in caplog.text
