"""The instructors' page of where learners struggle (/instructor/coach). Thin: see struggles.py.

A visitor who is not signed in is sent to sign in; a signed-in learner gets the site's 404 (the
page does not exist for them). The same report is `GET /api/v1/coach/struggles`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from app.auth.deps import OptionalLearner
from app.coach import struggles
from app.content import service as content
from app.content.schemas import SLUG_PATTERN
from app.db import SessionDep
from app.i18n import LocaleDep
from app.templating import refuse_unless_instructor, render

router = APIRouter(include_in_schema=False)

PAGE = "/instructor/coach"
DAY_CHOICES = (7, 30, 90, 365)  # the page's periods; another `days` takes the nearest


@router.get(PAGE)
def struggles_page(
    request: Request,
    session: SessionDep,
    learner: OptionalLearner,
    locale: LocaleDep,
    lesson_id: Annotated[str | None, Query(max_length=64, pattern=SLUG_PATTERN)] = None,
    days: Annotated[int, Query(ge=1, le=365)] = 30,
) -> Response:
    refused = refuse_unless_instructor(request, learner, locale, PAGE)
    if refused is not None:
        return refused
    days = min(DAY_CHOICES, key=lambda choice: abs(choice - days))

    report = struggles.report(
        session,
        locale=locale,
        secret=request.app.state.settings.secret_key,
        lesson_id=lesson_id,
        days=days,
    )
    return render(
        request,
        "coach/struggles.html",
        locale=locale,
        report=report,
        lessons=content.localized_course(locale).lessons,
        days=days,
        day_choices=DAY_CHOICES,
        headers={"Cache-Control": "no-store"},
    )
