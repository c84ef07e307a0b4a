"""docker-compose.yml and the Dockerfile stay consistent with the code they run.

A Docker engine does not run here; `docker compose config` (or docker-compose v1) validates the
compose file with the client alone where one is installed, and the rest is checked structurally.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from app.config import REPO_ROOT, Settings
from grader.worker import parse_args

COMPOSE = REPO_ROOT / "docker-compose.yml"
DOCKERFILE = REPO_ROOT / "Dockerfile"
SECRET = "s" * 48
REQUIRED_ENV = {"RDV_SECRET_KEY": SECRET, "POSTGRES_PASSWORD": "p" * 24, "DOCKER_GID": "999"}


def compose_cli() -> list[str] | None:
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    ):
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def compose() -> dict[str, Any]:
    return YAML(typ="safe").load(COMPOSE.read_text())


def with_defaults(value: str) -> str:
    """A compose value with each `${VAR:-default}` replaced by its default."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)


def stages() -> dict[str, str]:
    found = re.findall(r"^FROM\s+(\S+)\s+AS\s+(\S+)", DOCKERFILE.read_text(), re.M | re.I)
    return {name: base for base, name in found}


@pytest.mark.skipif(compose_cli() is None, reason="no docker compose client installed")
def test_compose_config_validates_with_the_client() -> None:
    cli = compose_cli()
    assert cli is not None
    env = {**os.environ, **REQUIRED_ENV}
    for extra in ([], ["--profile", "gpu"]):
        checked = subprocess.run(
            [*cli, "-f", str(COMPOSE), *extra, "config", "-q"],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO_ROOT,
        )
        assert checked.returncode == 0, checked.stderr
    # Without a secret, a database password or the socket's group, compose refuses to start,
    # with a sentence saying why (there is no default PostgreSQL password).
    for name in REQUIRED_ENV:
        refused = subprocess.run(
            [*cli, "-f", str(COMPOSE), "config", "-q"],
            capture_output=True,
            text=True,
            env={key: value for key, value in env.items() if key != name},
            cwd=REPO_ROOT,
        )
        assert refused.returncode != 0
        assert name in refused.stderr


def test_compose_runs_web_postgres_and_both_worker_kinds() -> None:
    services = compose()["services"]
    assert {"web", "postgres", "grader-cpu", "grader-gpu"} <= set(services)
    assert services["web"]["environment"]["RDV_GRADING_BACKEND"] == "procrastinate"
    assert services["web"]["build"]["target"] == "web"
    for name, queue in (("grader-cpu", "cpu"), ("grader-gpu", "gpu")):
        args = parse_args(services[name]["command"] + ["--dsn", "postgresql://x@y/z"])
        assert args.queue == queue
        assert services[name]["build"]["target"] in stages()
        assert services[name]["environment"]["RDV_SANDBOX"] == "docker"
        volumes = [with_defaults(volume) for volume in services[name]["volumes"]]
        assert "/var/run/docker.sock:/var/run/docker.sock" in volumes
        jobs = with_defaults(services[name]["environment"]["RDV_JOBS_DIR"])
        assert f"{jobs}:{jobs}" in volumes  # the same path on the host and in the worker
        assert services[name]["environment"]["RDV_SANDBOX_DOCKER_USER"] == "10001:10001"
        assert services[name]["group_add"], "the worker needs the Docker socket's group"
        assert services[name]["healthcheck"]["test"][2:4] == ["-m", "grader.heartbeat"]
    devices = services["grader-gpu"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    gpu_args = parse_args(services["grader-gpu"]["command"] + ["--dsn", "postgresql://x@y/z"])
    assert gpu_args.gpus == ",".join(devices[0]["device_ids"])


def test_web_environment_is_accepted_by_settings() -> None:
    env = {
        key: re.sub(r"\$\{[^}]*\}", "x", str(value))
        for key, value in compose()["services"]["web"]["environment"].items()
        if key.startswith("RDV_")
    }
    env["RDV_SECRET_KEY"] = SECRET
    settings = Settings.model_validate({key[4:].lower(): value for key, value in env.items()})
    assert settings.environment == "production"
    assert settings.grading_backend == "procrastinate"
    assert settings.database_url.startswith("postgresql+psycopg://")


def test_dockerfile_stages_copy_what_exists_and_run_real_modules() -> None:
    text = DOCKERFILE.read_text()
    assert {"web", "grader", "grader-gpu"} <= set(stages())
    for source in re.findall(r"^COPY\s+(?!--)(.+?)\s+\S+$", text, re.M):
        for path in source.split():
            if "[" in path:
                continue  # a pattern for optional build inputs (.build-local)
            assert (REPO_ROOT / path).exists(), f"Dockerfile copies {path}, which does not exist"
    assert re.search(r'ENTRYPOINT \["python", "-m", "grader.worker"\]', text)
    assert (REPO_ROOT / "grader" / "worker.py").exists()
    assert re.search(r'CMD \["python", "-m", "app", "serve", .*"--no-migrate"\]', text)
    # Every image installs from the lock file, the web image without torch.
    assert "-c requirements.lock" in text
    assert "pip-locked '.[web]'" in text and "pip-locked '.[grader]'" in text
    ignored = (REPO_ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored


def test_the_lock_pins_every_dependency_pyproject_names() -> None:
    import tomllib

    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        wanted += extra
    pins = dict(
        re.findall(
            r"^([a-z0-9][a-z0-9._-]*)==(\S+)$", (REPO_ROOT / "requirements.lock").read_text(), re.M
        )
    )

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    pinned = {norm(name): version for name, version in pins.items()}
    for requirement in wanted:
        name = norm(re.split(r"[\[<>=!~ ;]", requirement, maxsplit=1)[0])
        assert name in pinned, f"requirements.lock does not pin {name}: run make lock"
    assert pinned["torch"] == "2.13.0"  # the same pin fits the CPU and the CUDA build


def test_migrations_run_once_before_the_web_app() -> None:
    services = compose()["services"]
    assert services["migrate"]["command"] == ["python", "-m", "app", "migrate"]
    assert services["migrate"]["restart"] == "no"
    assert services["web"]["depends_on"]["migrate"]["condition"] == (
        "service_completed_successfully"
    )
    assert "healthz" in " ".join(services["web"]["healthcheck"]["test"])


def test_every_service_image_builds_from_this_dockerfile() -> None:
    for name, service in compose()["services"].items():
        if "build" in service:
            assert Path(service["build"]["context"]) == Path(".")
            assert service["build"]["target"] in stages(), name
