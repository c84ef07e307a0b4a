"""One typed Settings object, read from the environment (prefix RDV_)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent
DEV_SECRET = "dev-only-insecure-secret-change-me"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RDV_", env_file=".env", extra="ignore")

    environment: Literal["development", "test", "production"] = "development"
    database_url: str = f"sqlite:///{REPO_ROOT / 'rendezvous.db'}"
    secret_key: str = DEV_SECRET
    lessons_dir: Path = REPO_ROOT / "lessons"
    base_url: str = "http://127.0.0.1:8000"
    # Grading: "local" runs jobs in-process; "procrastinate" hands them to grader workers.
    grading_backend: Literal["local", "procrastinate"] = "local"
    grading_concurrency: int = 1
    max_submissions_in_flight: int = 2
    default_locale: str = "en"
    # The coach (issue 14). Without a URL the built-in coach answers alone (no model, no network).
    # With one: any OpenAI-compatible chat-completions server (vLLM, llama.cpp, Ollama, hosted).
    coach_url: str | None = None
    coach_model: str = "default"
    coach_api_key: str | None = None
    coach_timeout_seconds: float = Field(20.0, gt=0, le=300)
    coach_questions_per_hour: int = Field(20, ge=1)

    @model_validator(mode="after")
    def _refuse_weak_secret(self) -> Settings:
        if self.environment == "production" and (
            self.secret_key == DEV_SECRET or len(self.secret_key) < 32
        ):
            raise ValueError(
                "RDV_SECRET_KEY must be set to a random string of at least 32 characters "
                "in production (for example: "
                "python -c 'import secrets; print(secrets.token_urlsafe(48))')"
            )
        return self

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")


@lru_cache
def get_settings() -> Settings:
    return Settings()
