"""Settings of the grading pipeline beyond the app's own (same RDV_ prefix)."""

from __future__ import annotations

from functools import lru_cache

from pydantic_settings import BaseSettings, SettingsConfigDict


class SubmissionSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RDV_", env_file=".env", extra="ignore")

    # Start the grading backend with the web app. Unset: yes, except when RDV_ENVIRONMENT=test
    # (unit tests build many apps and grade through their own backends).
    grading_autostart: bool | None = None
    # The procrastinate queue's PostgreSQL database; unset: the app's own database.
    queue_url: str | None = None
    # A running job whose runner has not said it is alive for this long is taken back.
    lease_seconds: float = 30.0
    # Runs of one submission when its runner dies (never when the learner's code fails).
    max_attempts: int = 2
    # Also run the queue's results worker in the web process (procrastinate backend).
    results_worker: bool = True

    def queue_conninfo(self, database_url: str) -> str:
        """A libpq URL (procrastinate speaks psycopg, not SQLAlchemy URLs)."""
        url = self.queue_url or database_url
        if not url.startswith("postgresql"):
            raise ValueError(
                "RDV_GRADING_BACKEND=procrastinate needs PostgreSQL: set RDV_DATABASE_URL or "
                "RDV_QUEUE_URL to a postgresql:// URL"
            )
        scheme, rest = url.split("://", 1)
        return "postgresql://" + rest if "+" in scheme else url

    def autostart(self, environment: str) -> bool:
        if self.grading_autostart is None:
            return environment != "test"
        return self.grading_autostart


@lru_cache
def get_submission_settings() -> SubmissionSettings:
    return SubmissionSettings()
