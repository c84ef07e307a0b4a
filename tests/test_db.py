from sqlalchemy import inspect, text
from sqlalchemy.orm import Session


def test_database_is_migrated_and_reachable(session: Session) -> None:
    assert session.execute(text("SELECT 1")).scalar_one() == 1
    tables = inspect(session.connection()).get_table_names()
    assert "alembic_version" in tables
