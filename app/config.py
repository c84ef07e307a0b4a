"""One typed Settings object, read from the environment (prefix RDV_)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator
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
    # The coach. Without a URL the built-in coach answers alone (no model, no network).
    # With one: any OpenAI-compatible chat-completions server (vLLM, llama.cpp, Ollama, hosted).
    coach_url: str | None = None
    coach_model: str = "default"
    # A secret: never in a repr, a log line or an error page (SecretStr prints as '**********').
    coach_api_key: SecretStr | None = None
    coach_timeout_seconds: float = Field(20.0, gt=0, le=300)
    coach_questions_per_hour: int = Field(20, ge=1)
    # Model calls at once (their own threads, never the request threads); more questions are
    # answered by the built-in coach at once.
    coach_concurrency: int = Field(16, ge=1, le=1000)
    # Multiplies the per-address sign-in, registration and reset allowances (AuthRateLimits):
    # raise it where many learners share one address (a classroom behind NAT).
    auth_address_limit_factor: int = Field(1, ge=1, le=1000)
    # Instructor analytics: a figure counting fewer learners than this (but some) shows as "<N".
    analytics_min_cohort: int = Field(5, ge=1, le=1000)
    # The analytics consumer (app/analytics/consumer.py): "thread", one in the app's process
    # (any database); "queue", a procrastinate task run by every app process's worker
    # (PostgreSQL, several app processes). Started with the app unless in tests (None).
    analytics_consumer: Literal["thread", "queue"] = "thread"
    analytics_autostart: bool | None = None

    # Grading pipeline. Start the backend with the web app; unset: yes, except when
    # RDV_ENVIRONMENT=test (unit tests build many apps and grade through their own backends).
    grading_autostart: bool | None = None
    # The procrastinate queue's PostgreSQL database; unset: the app's own database.
    queue_url: str | None = None
    # A running job whose runner has not said it is alive for this long is taken back.
    lease_seconds: float = 30.0
    # Runs of one submission when its runner dies (never when the learner's code fails).
    max_attempts: int = 2
    # Also run the queue's results worker in the web process (procrastinate backend).
    results_worker: bool = True

    # Load: database connections per process, and how long a request waits for one before it is
    # answered 503 with Retry-After (instead of queueing behind a pile-up).
    db_pool_size: int = 10
    db_pool_overflow: int = 5
    db_checkout_timeout_s: float = 2.0
    # Requests one learner may have in progress at once, and live event streams open at once.
    max_requests_per_learner: int = 8
    max_streams_per_learner: int = 4
    # Coach questions one learner may have waiting at once, counted apart from the requests
    # above: a learner's questions waiting on a slow model never make another endpoint 429.
    max_questions_per_learner: int = 8
    # Admission slots one learner's requests may hold at once (the rest of theirs wait for
    # their turn without a slot): a few learners whose requests wait on their own locks never
    # hold every slot.
    max_slots_per_learner: int = Field(2, ge=1)
    # Stopping (SIGTERM): requests in progress get this long to finish, then are cut off.
    shutdown_grace_s: float = Field(20.0, gt=0)
    # Connections: a request's headers must arrive within this; an idle one closes after it.
    header_timeout_s: float = Field(10.0, gt=0)
    keep_alive_s: float = Field(5.0, gt=0)
    # Request bodies: JSON bodies and forms are refused with 413 above this many bytes.
    max_body_bytes: int = 1024 * 1024
    # A request body is read whole before the request takes an admission slot, within
    # body_grace_s plus one second per body_min_rate bytes; slower: 408 (app/request_body.py).
    body_grace_s: float = Field(5.0, gt=0)
    body_min_rate: int = Field(16 * 1024, ge=1)
    # Client addresses: X-Forwarded-For is believed only from these proxies (comma-separated IPs).
    trusted_proxies: str = ""

    # Mail (password reset): an SMTP server; unset host: mail is not sent, the reset is logged
    # as impossible (development).
    smtp_host: str | None = None
    smtp_port: int = 25
    smtp_user: str | None = None
    smtp_password: str | None = None
    smtp_starttls: bool = False
    mail_from: str = "Rendezvous <no-reply@localhost>"
    # The outbox's sender in the web process (app/outmail/sender.py); unset: yes, except when
    # RDV_ENVIRONMENT=test (tests deliver with `drain`). Mails at the relay at once:
    mail_autostart: bool | None = None
    mail_concurrency: int = Field(4, ge=1, le=64)

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

    @property
    def secure_cookies(self) -> bool:
        """`Secure` on every cookie in production (TLS ends at the proxy whatever the base URL)."""
        return self.environment == "production" or self.base_url.startswith("https://")

    def queue_conninfo(self) -> str:
        """A libpq URL for the grading queue (procrastinate speaks psycopg, not SQLAlchemy)."""
        url = self.queue_url or self.database_url
        if not url.startswith("postgresql"):
            raise ValueError(
                "RDV_GRADING_BACKEND=procrastinate needs PostgreSQL: set RDV_DATABASE_URL or "
                "RDV_QUEUE_URL to a postgresql:// URL"
            )
        scheme, rest = url.split("://", 1)
        return "postgresql://" + rest if "+" in scheme else url

    def analytics_autostarts(self) -> bool:
        if self.analytics_autostart is None:
            return self.environment != "test"
        return self.analytics_autostart

    def mail_autostarts(self) -> bool:
        if self.mail_autostart is None:
            return self.environment != "test"
        return self.mail_autostart

    def grading_autostarts(self) -> bool:
        if self.grading_autostart is None:
            return self.environment != "test"
        return self.grading_autostart


@lru_cache
def get_settings() -> Settings:
    return Settings()
