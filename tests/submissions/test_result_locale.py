"""A Result reads in the viewer's language (?locale=, the cookie, Accept-Language), never in the
language the code was submitted in; the live events too (both DBs)."""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.auth.models import User
from app.content.service import get_exercise
from app.submissions import jobs, service
from grader import i18n
from grader.checks.base import all_checks
from grader.contract import CheckResult, Result
from grader.i18n import message_fields, msg
from tests.submissions.test_events import parse_sse

pytestmark = pytest.mark.usefixtures("stream_sessions")
EXERCISE = "ddp-fundamentals/train"


def failed_result() -> Result:
    definition = all_checks()["dist.init"]
    message = msg("combine.with_ranks", i18n.WITH_RANKS, ranks=2, message=msg("run.job_oom", "x"))
    message_id, params = message_fields(message)
    summary = msg("summary.failed", i18n.SUMMARY_FAILED, failed=1, total=1)
    summary_id, summary_params = message_fields(summary)
    check = CheckResult(
        id="dist.init",
        status="fail",
        title=definition.title,
        message=message,
        hint=definition.hint,
        message_id=message_id,
        params=params,
    )
    return Result(
        status="fail",
        summary=summary,
        summary_id=summary_id,
        summary_params=summary_params,
        checks=[check],
    )


def submitted_in_portuguese(session: Session, learner: User) -> uuid.UUID:
    submitted = service.submit(
        session, user_id=learner.id, exercise=EXERCISE, code="print(1)\n", locale="pt-BR"
    )
    session.flush()
    claimed = jobs.claim(session, submitted.submission.id, "test-host:1:abc")
    assert claimed is not None
    result = failed_result()
    jobs.record_events(
        session, claimed.id, 1, [{"kind": "check", "data": result.checks[0].model_dump()}]
    )
    assert jobs.complete(session, claimed.id, result, attempt=1, owner=None)
    session.flush()
    return claimed.id


def test_the_result_follows_the_viewer_not_the_submission(
    client: TestClient, auth: dict[str, str], session: Session, learner: User
) -> None:
    url = f"/api/v1/submissions/{submitted_in_portuguese(session, learner)}"
    english = client.get(url, headers=auth).json()["result"]
    assert english["summary"] == "1 of 1 checks failed"
    assert english["checks"][0]["message_id"] == "combine.with_ranks"
    assert english["checks"][0]["params"]["ranks"] == 2
    for how in (
        {"params": {"locale": "tr"}},
        {"headers": {"Accept-Language": "tr-TR,tr;q=0.9"}},
        {"cookies": {"rdv_locale": "tr"}},
    ):
        answer = client.get(
            url,
            headers={**auth, **how.get("headers", {})},
            params=how.get("params"),
            cookies=how.get("cookies"),
        )
        result = answer.json()["result"]
        assert answer.headers["content-language"] == "tr"
        assert result["summary"] == "1 kontrolden 1 tanesi kaldı", how
        check = result["checks"][0]
        assert check["title"] == "Her rank süreç grubuna katılıyor"
        assert check["message"].startswith("2 rank ile: ")
        # The exercise's own hint (lesson YAML) in Turkish, not the Portuguese it was sent in.
        own = get_exercise(EXERCISE).spec.hints.get("dist.init")
        if isinstance(own, dict) and own.get("tr"):
            assert check["hint"] == own["tr"]
        else:
            assert check["hint"].startswith("Her rank'in başında")
    listed = client.get("/api/v1/submissions", headers=auth, params={"locale": "pt-BR"}).json()
    assert listed["submissions"][0]["summary"] == "1 de 1 verificações falharam"
    # ?locale= wins over the cookie.
    chosen = client.get(url, headers=auth, params={"locale": "en"}, cookies={"rdv_locale": "tr"})
    assert chosen.json()["result"]["summary"] == "1 of 1 checks failed"


def test_live_events_follow_the_viewer(
    client: TestClient, auth: dict[str, str], session: Session, learner: User
) -> None:
    submission_id = submitted_in_portuguese(session, learner)
    url = f"/api/v1/submissions/{submission_id}/events?locale=tr"
    events = {str(e["event"]): e["data"] for e in parse_sse(client.get(url, headers=auth).text)}
    check = events["check"]
    assert isinstance(check, dict) and check["title"] == "Her rank süreç grubuna katılıyor"
    done = events["done"]
    assert isinstance(done, dict) and done["result"]["summary"].startswith("1 kontrolden")


def test_a_platform_error_reads_in_the_viewer_s_language(
    client: TestClient, auth: dict[str, str], session: Session, learner: User
) -> None:
    """The grader's platform errors carry ids too: the summary and the error follow the viewer."""
    submitted = service.submit(
        session, user_id=learner.id, exercise=EXERCISE, code="print(1)\n", locale="pt-BR"
    )
    session.flush()
    claimed = jobs.claim(session, submitted.submission.id, "test-host:1:abc")
    assert claimed is not None
    error = msg("platform.no_sandbox", "the sandbox is not available: {error}", error="no bwrap")
    assert jobs.complete(session, claimed.id, Result.platform_error(error), attempt=1, owner=None)
    session.flush()
    session.expire_all()  # finish() updates the row behind the session's back
    url = f"/api/v1/submissions/{claimed.id}"
    english = client.get(url, headers=auth).json()["result"]
    assert english["summary"] == "The grader failed; this does not count."
    assert english["error"] == "the sandbox is not available: no bwrap"
    turkish = client.get(url, headers=auth, params={"locale": "tr"}).json()["result"]
    assert turkish["status"] == "error"
    assert turkish["summary"] == "Değerlendirici hata verdi; bu gönderim sayılmaz."
    assert turkish["error"] == "sandbox kullanılamıyor: no bwrap"
