"""HTTP for the instructors' analytics: the report as JSON, each table as CSV, and the page
/instructor/analytics. Thin: see service.py. Instructors only (a visitor 401, a learner 403 on
the API; on the page a visitor is sent to sign in and a learner gets the site's 404)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response
from sqlalchemy.orm import Session

from app.analytics import export, service
from app.analytics.schemas import AnalyticsReport
from app.auth.deps import CurrentInstructor, OptionalLearner
from app.content import service as content
from app.content.schemas import SLUG_PATTERN
from app.db import SessionDep
from app.errors import N_, AppError, error_responses
from app.i18n import LocaleDep
from app.templating import refuse_unless_instructor, render

api_router = APIRouter(tags=["instructor"])
router = APIRouter(include_in_schema=False)

PAGE = "/instructor/analytics"
NO_STORE = {"Cache-Control": "no-store"}


@dataclass(frozen=True)
class ReportQuery:
    lesson_id: str | None
    since: date | None
    until: date | None
    by_locale: bool

    def window(self) -> tuple[datetime | None, datetime | None]:
        """[since 00:00 UTC, the day after `until` 00:00 UTC): both days included."""
        start = datetime.combine(self.since, time(), UTC) if self.since else None
        # The calendar's last day has no day after it: no upper bound (it was a 500).
        last = self.until if self.until and self.until < date.max else None
        end = datetime.combine(last + timedelta(days=1), time(), UTC) if last else None
        return start, end

    def params(self, lesson_id: str) -> str:
        query: dict[str, str] = {"lesson_id": lesson_id}
        if self.since:
            query["since"] = self.since.isoformat()
        if self.until:
            query["until"] = self.until.isoformat()
        if self.by_locale:
            query["by_locale"] = "true"
        return urlencode(query)


# Empty: no bound (the page's form sends empty date fields). A day the calendar lacks
# (2026-02-30) still passes the pattern and is refused with invalid_date.
DAY = r"^(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))?$"
BAD_DAY = N_("{name}: give a day as YYYY-MM-DD, e.g. 2026-12-01.")


def _day(name: str, value: str | None) -> date | None:
    if not value:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise AppError("invalid_date", 422, BAD_DAY, name=name) from exc


def report_query(
    lesson_id: Annotated[
        str | None,
        Query(max_length=64, pattern=SLUG_PATTERN, description="Default: the course's first"),
    ] = None,
    since: Annotated[
        str | None, Query(pattern=DAY, description="First day counted, YYYY-MM-DD (UTC)")
    ] = None,
    until: Annotated[
        str | None, Query(pattern=DAY, description="Last day counted, YYYY-MM-DD (UTC)")
    ] = None,
    by_locale: Annotated[bool, Query(description="Add a row per learner locale")] = False,
) -> ReportQuery:
    return ReportQuery(lesson_id, _day("since", since), _day("until", until), by_locale)


ReportQueryDep = Annotated[ReportQuery, Depends(report_query)]


def _report(request: Request, session: Session, query: ReportQuery, locale: str) -> AnalyticsReport:
    lesson_id = query.lesson_id or _first_lesson(locale)
    since, until = query.window()
    try:
        return service.report(
            session,
            lesson_id=lesson_id,
            locale=locale,
            min_cohort=request.app.state.settings.analytics_min_cohort,
            since=since,
            until=until,
            by_locale=query.by_locale,
        )
    except content.ContentNotFound as exc:
        raise AppError(
            "not_found", 404, N_("There is no lesson with this id: check lesson_id.")
        ) from exc


def _first_lesson(locale: str) -> str:
    available = [item.id for item in content.localized_course(locale).lessons if item.available]
    if not available:
        raise AppError("not_found", 404, N_("There is no lesson with this id: check lesson_id."))
    return available[0]


@api_router.get(
    "/instructor/analytics",
    response_model=AnalyticsReport,
    responses=error_responses(401, 403, 404, 422),
)
def read_analytics(
    request: Request,
    session: SessionDep,
    instructor: CurrentInstructor,
    locale: LocaleDep,
    query: ReportQueryDep,
) -> JSONResponse:
    """Instructors only: where learners stop and fail in one lesson.

    Per step, learners who reached and completed it (in the lesson's order); per quiz question,
    learners who answered, were right at first try, and chose each choice; per exercise,
    learners who opened, submitted and passed it (and at their first judged submission), the
    median judged submissions and minutes to the first pass, and per check how many failed
    submissions it failed first. Counts are of distinct learners; a count of fewer learners than
    `min_cohort` (RDV_ANALYTICS_MIN_COHORT) is `null`. Titles are in the request's language.
    """
    report = _report(request, session, query, locale)
    return JSONResponse(
        report.model_dump(mode="json"), headers={"Content-Language": locale, **NO_STORE}
    )


@api_router.get(
    "/instructor/analytics/{table}.csv",
    response_class=Response,
    responses={
        200: {"content": {"text/csv": {"schema": {"type": "string"}}}},
        **error_responses(401, 403, 404, 422),
    },
)
def export_analytics(
    request: Request,
    session: SessionDep,
    instructor: CurrentInstructor,
    locale: LocaleDep,
    query: ReportQueryDep,
    table: export.Table,
) -> Response:
    """Instructors only: one table of the report as CSV (a hidden small count reads "<5")."""
    report = _report(request, session, query, locale)
    name = f"{report.lesson_id}-{table}.csv"
    return Response(
        export.to_csv(report, table),
        media_type="text/csv; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="{name}"',
            "Content-Language": locale,
            **NO_STORE,
        },
    )


@router.get(PAGE)
def analytics_page(
    request: Request,
    session: SessionDep,
    learner: OptionalLearner,
    locale: LocaleDep,
    query: ReportQueryDep,
) -> Response:
    refused = refuse_unless_instructor(request, learner, locale, PAGE)
    if refused is not None:
        return refused
    report = _report(request, session, query, locale)
    return render(
        request,
        "analytics/analytics.html",
        locale=locale,
        report=report,
        query=query,
        params=query.params(report.lesson_id),
        tables=export.TABLES,
        lessons=content.localized_course(locale).lessons,
        headers=NO_STORE,
    )
