"""Apply the Alembic migrations to the database named by the settings (or a given URL)."""

from __future__ import annotations

from alembic import command
from alembic.config import Config

from app.config import REPO_ROOT, get_settings


def alembic_config(url: str | None = None) -> Config:
    cfg = Config(str(REPO_ROOT / "alembic.ini"))
    cfg.set_main_option("script_location", str(REPO_ROOT / "migrations"))
    cfg.set_main_option("sqlalchemy.url", (url or get_settings().database_url).replace("%", "%%"))
    cfg.attributes["skip_logging"] = True
    return cfg


def upgrade(url: str | None = None) -> None:
    command.upgrade(alembic_config(url), "head")
