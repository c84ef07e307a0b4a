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


def stages() -> dict[str, str]:
    found = re.findall(r"^FROM\s+(\S+)\s+AS\s+(\S+)", DOCKERFILE.read_text(), re.M | re.I)
    return {name: base for base, name in found}


@pytest.mark.skipif(compose_cli() is None, reason="no docker compose client installed")
def test_compose_config_validates_with_the_client() -> None:
    cli = compose_cli()
    assert cli is not None
    env = {**os.environ, "RDV_SECRET_KEY": SECRET}
    for extra in ([], ["--profile", "gpu"]):
        checked = subprocess.run(
            [*cli, "-f", str(COMPOSE), *extra, "config", "-q"],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO_ROOT,
        )
        assert checked.returncode == 0, checked.stderr
    # Without a secret the web service refuses to start, with a sentence saying why.
    env.pop("RDV_SECRET_KEY")
    refused = subprocess.run(
        [*cli, "-f", str(COMPOSE), "config", "-q"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
    )
    assert refused.returncode != 0
    assert "RDV_SECRET_KEY" in refused.stderr


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
        volumes = services[name]["volumes"]
        assert "/var/run/docker.sock:/var/run/docker.sock" in volumes
        jobs = services[name]["environment"]["RDV_JOBS_DIR"]
        assert f"{jobs}:{jobs}" in volumes  # the same path on the host and in the worker
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
            assert (REPO_ROOT / path).exists(), f"Dockerfile copies {path}, which does not exist"
    assert re.search(r'ENTRYPOINT \["python", "-m", "grader.worker"\]', text)
    assert (REPO_ROOT / "grader" / "worker.py").exists()
    assert re.search(r'CMD \["python", "-m", "app", "serve"', text)
    # torch is pinned to the version pyproject.toml pins.
    pinned = re.search(r'"torch==([\d.]+)"', (REPO_ROOT / "pyproject.toml").read_text())
    assert pinned and f"ARG TORCH_VERSION={pinned.group(1)}" in text
    ignored = (REPO_ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored


def test_every_service_image_builds_from_this_dockerfile() -> None:
    for name, service in compose()["services"].items():
        if "build" in service:
            assert Path(service["build"]["context"]) == Path(".")
            assert service["build"]["target"] in stages(), name
