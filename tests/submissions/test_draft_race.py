"""Issue 39, D3: two devices saving a draft from the same `base_updated_at` at the same moment.
Exactly one is saved; the other gets `draft_conflict` with both versions, every round (the check
was a read, a compare and a write: on PostgreSQL both devices were told "saved" in 39 of 40
rounds and one edit was lost). Real transactions on SQLite and PostgreSQL, one per device."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from app.submissions import service
from app.submissions.errors import DraftConflict

EXERCISE = "ddp-fundamentals/train"
ROUNDS = 10


def _save(
    engine: Engine, learner: uuid.UUID, code: str, base: datetime, start: threading.Barrier
) -> tuple[str, dict[str, object] | None]:
    with Session(engine, expire_on_commit=False) as session:
        start.wait()
        try:
            with session.begin():
                service.save_draft(
                    session, user_id=learner, exercise=EXERCISE, code=code, base_updated_at=base
                )
        except DraftConflict as conflict:
            return "conflict", conflict.extra
    return "saved", None


def test_two_devices_saving_from_the_same_base_never_both_win(
    committing_engine: Engine, committed_learner_id: uuid.UUID
) -> None:
    with Session(committing_engine, expire_on_commit=False) as session, session.begin():
        base = service.save_draft(
            session, user_id=committed_learner_id, exercise=EXERCISE, code="# start\n"
        ).updated_at
    outcomes = []
    with ThreadPoolExecutor(2) as pool:
        for round_ in range(ROUNDS):
            start = threading.Barrier(2)
            codes = [f"# device A, round {round_}\n", f"# device B, round {round_}\n"]
            futures = [
                pool.submit(_save, committing_engine, committed_learner_id, code, base, start)
                for code in codes
            ]
            results = [future.result() for future in futures]
            outcomes.append(sorted(kind for kind, _ in results))
            with Session(committing_engine) as session:
                stored = service.get_draft(session, user_id=committed_learner_id, exercise=EXERCISE)
                assert stored is not None
                winner = codes[[kind for kind, _ in results].index("saved")]
                assert stored.code == winner  # what the winner was told is what is kept
                base = stored.updated_at
            extra = next(extra for kind, extra in results if kind == "conflict")
            assert extra is not None
            assert extra["stored"] == {"code": winner, "updated_at": base.isoformat()}
            assert extra["sent"] == {"code": codes[1 - codes.index(winner)]}
    assert outcomes == [["conflict", "saved"]] * ROUNDS
