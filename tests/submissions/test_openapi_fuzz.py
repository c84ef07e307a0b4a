"""Fuzz the submissions and drafts API from its own OpenAPI document with schemathesis: no 500s,
every response as documented (the event stream is covered by test_events.py)."""

from __future__ import annotations

import itertools

import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance
from sqlalchemy.orm import Session

from app.auth.models import User
from tests.api.test_openapi_fuzz import refused_by_input_rule
from tests.auth.factories import bearer, create_token

INCLUDED_PATH = r"^/api/v1/(submissions|drafts)(?!.*/events$)"
EXAMPLES_PER_OPERATION = 15


def test_submissions_api_matches_its_openapi_document(
    app: FastAPI, session: Session, learner: User
) -> None:
    signed_in = bearer(create_token(session, learner))
    schema = schemathesis.openapi.from_asgi("/openapi.json", app).include(path_regex=INCLUDED_PATH)
    # Unknown query parameters are ignored, as most HTTP APIs do (a newer app may send one
    # an older server does not know); only declared parameters are held to the document.
    schema.config.generation.update(allow_extra_parameters=False)
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    assert len(operations) == 6
    calls: list[tuple[str, int]] = []
    for operation, mode in itertools.product(operations, GenerationMode):

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def check(case: schemathesis.Case) -> None:
            excluded = []
            if (
                (case.method, case.path) == ("GET", "/api/v1/submissions")
                and case.query
                and ("cursor" in case.query)
            ):
                # A cursor the server never gave out is refused (422) though it fits the
                # pattern: no schema can say which strings were given out.
                excluded = [positive_data_acceptance]
            if refused_by_input_rule(case):
                excluded = [positive_data_acceptance]
            response = case.call_and_validate(headers=dict(signed_in), excluded_checks=excluded)
            calls.append((f"{case.method} {case.path}", response.status_code))

        check()
    assert {name for name, _ in calls} == {f"{op.method.upper()} {op.path}" for op in operations}
    assert all(status < 500 for _, status in calls)
