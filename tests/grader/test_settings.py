"""grader.settings: every operator setting of the grader in one object, read once, documented in
one table; nothing else in grader/ reads the environment."""

from __future__ import annotations

import ast
import logging
import re
from pathlib import Path

import pytest

from grader import settings as grader_settings
from grader.settings import ENV, GraderSettings, configure, override, reset, settings

ROOT = Path(__file__).resolve().parents[2]
GRADER = ROOT / "grader"
# Modules that may read the environment: the settings themselves, and what runs in the sandbox
# and its ranks, whose environment IS the hand-over (grader.inside, grader.harness).
MAY_READ = {"settings.py"}
HAND_OVER = ("inside/", "harness/")
# Reads not yet converted to `settings()` (none left). An entry with no read left fails below, so
# the list only shrinks.
PENDING: set[str] = set()


def test_each_variable_sets_its_field() -> None:
    env = {
        "RDV_SANDBOX": "docker",
        "RDV_JOBS_DIR": "/srv/jobs",
        "RDV_GPUS": "0, 2",
        "RDV_WARM_POOL": "3",
        "RDV_WARM_IDLE_S": "30.5",
        "RDV_PARALLEL_LAUNCHES": "3",
        "RDV_SANDBOX_UID_BASE": "5000000",
        "RDV_SANDBOX_SLOTS": "8",
        "RDV_SANDBOX_STATE_DIR": "/run/x",
        "RDV_SANDBOX_IMAGE": "img:2",
        "RDV_SANDBOX_DOCKER_USER": "10001:10001",
        "RDV_WORKER_HEARTBEAT_FILE": "/tmp/beat",
        "RDV_QUEUE_URL": "postgresql://q",
    }
    assert set(env) == set(ENV.values())
    assert GraderSettings.from_env(env) == GraderSettings(
        sandbox="docker",
        jobs_dir=Path("/srv/jobs"),
        gpus=(0, 2),
        warm_pool=3,
        warm_idle_s=30.5,
        parallel_launches=3,
        sandbox_uid_base=5000000,
        sandbox_slots=8,
        sandbox_state_dir=Path("/run/x"),
        sandbox_image="img:2",
        sandbox_docker_user="10001:10001",
        worker_heartbeat_file=Path("/tmp/beat"),
        queue_url="postgresql://q",
    )
    # Each field is named like its variable.
    assert all(var == f"RDV_{name.upper()}" for name, var in ENV.items())


def test_the_defaults_and_the_fallbacks() -> None:
    assert GraderSettings.from_env({}) == GraderSettings()
    assert GraderSettings.from_env({"RDV_GPUS": ""}).gpus == ()  # set, but no GPU at all
    queue = GraderSettings.from_env({"RDV_DATABASE_URL": "postgresql://app"})
    assert queue.queue_url == "postgresql://app"
    both = {"RDV_DATABASE_URL": "postgresql://app", "RDV_QUEUE_URL": "postgresql://q"}
    assert GraderSettings.from_env(both).queue_url == "postgresql://q"
    # The old undocumented alias is gone.
    assert GraderSettings.from_env({"RDV_GRADER_SANDBOX": "none"}).sandbox == "bwrap"


def test_a_bad_value_names_its_variable(caplog: pytest.LogCaptureFixture) -> None:
    for var, value in [
        ("RDV_GPUS", "0,one"),
        ("RDV_SANDBOX_SLOTS", "many"),
        ("RDV_WARM_IDLE_S", "soon"),
        ("RDV_PARALLEL_LAUNCHES", "all"),
    ]:
        with pytest.raises(ValueError, match=var):
            GraderSettings.from_env({var: value})
    # The pool's size falls back to its default, as it always did.
    with caplog.at_level(logging.WARNING, logger="grader.settings"):
        assert GraderSettings.from_env({"RDV_WARM_POOL": "lots"}).warm_pool is None
    assert "RDV_WARM_POOL" in caplog.text


def test_read_once_overridden_and_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RDV_JOBS_DIR", "/srv/a")
    first = settings()
    monkeypatch.setenv("RDV_JOBS_DIR", "/srv/b")
    assert settings() is first and first.jobs_dir == Path("/srv/a")  # read once
    with override(jobs_dir=Path("/srv/c"), gpus=(1,)) as changed:
        assert settings() is changed and settings().gpus == (1,)
    assert settings() is first
    assert configure(gpus=(0, 1)).gpus == (0, 1) and settings().gpus == (0, 1)
    reset()
    assert settings().jobs_dir == Path("/srv/b") and settings().gpus is None
    assert grader_settings.load().jobs_dir == Path("/srv/b")


def test_the_table_documents_every_setting() -> None:
    """One table in the module docstring, the same rows in the README, every variable once."""
    doc = grader_settings.__doc__ or ""
    documented = re.findall(r"^\| (RDV_[A-Z_]+) ", doc, flags=re.MULTILINE)
    assert sorted(documented) == sorted(ENV.values())
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = [line for line in doc.splitlines() if line.startswith("| RDV_")]
    assert all(line in readme for line in table), "README's grader settings table is stale"


def test_no_grader_module_reads_the_environment_but_the_settings() -> None:
    found, pending = {}, {}
    for path in sorted(GRADER.rglob("*.py")):
        name = str(path.relative_to(GRADER))
        if name in MAY_READ or name.startswith(HAND_OVER):
            continue
        reads = _environment_reads(path.read_text("utf-8"))
        if name in PENDING:
            pending[name] = reads
        elif reads:
            found[name] = reads
    assert not found, f"read the environment through grader.settings: {found}"
    assert set(pending) == PENDING, "a PENDING module was moved or removed"
    stale = [name for name, reads in pending.items() if not reads]
    assert not stale, f"no environment read left: take these off PENDING: {stale}"


def _environment_reads(source: str) -> list[int]:
    """Lines reading `os.environ` or calling `os.getenv`."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ("environ", "getenv")
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            lines.append(node.lineno)
    return sorted(lines)


def test_the_scan_finds_environment_reads() -> None:
    source = "import os\na = os.environ.get('X')\nb = os.getenv('Y')\nc = os.environ['Z']\n"
    assert _environment_reads(source) == [2, 3, 4]
