# Images for running Rendezvous at scale (see docker-compose.yml and README "Running at scale"):
#   web         the site and REST API, plus the queue's results worker; no torch (extra `web`)
#   grader      a CPU grader worker (`python -m grader.worker --queue cpu`) and the sandbox image it
#               starts one locked-down container from per job (RDV_SANDBOX=docker); extra `grader`
#   grader-gpu  the same with PyTorch's CUDA build, for `--queue gpu` workers
# Every Python package is installed at the version requirements.lock pins. Optional build inputs
# go in .build-local/ (ignored by git): wheels pip should prefer (the CPU torch wheel) and
# ca-certificates.crt (a CA bundle pip must trust). No BuildKit-only syntax: the classic
# builder builds this file too; it builds every stage before the target, hence the order:
# web (small) first, the GPU image last.
ARG BASE_IMAGE=debian:bookworm-20250520-slim

FROM ${BASE_IMAGE} AS python-base
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3 python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && python3 -m venv /opt/rendezvous \
 && echo /srv/rendezvous > /opt/rendezvous/lib/python3.11/site-packages/rendezvous-src.pth \
 && useradd --system --uid 10001 --user-group --home-dir /srv/rendezvous rendezvous
ENV PATH=/opt/rendezvous/bin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /srv/rendezvous
# pyproject.toml is listed so that the pattern may match nothing else.
COPY pyproject.toml .build-loca[l] /tmp/build-local/
COPY requirements.lock pyproject.toml ./
# Installs the dependencies of one extra (the project's own code is copied later, so a code
# change does not reinstall torch).
RUN printf '#!/bin/sh\nset -e\ncert=/tmp/build-local/ca-certificates.crt\n[ -f "$cert" ] && export PIP_CERT="$cert"\nexec pip install --find-links /tmp/build-local -c requirements.lock "$@"\n' \
      > /usr/local/bin/pip-locked \
 && chmod +x /usr/local/bin/pip-locked

# ---- the web app: no torch, no Docker client ----
FROM python-base AS web
RUN pip-locked '.[web]' && rm -rf /tmp/build-local build
COPY alembic.ini babel.cfg ./
COPY app ./app
COPY grader ./grader
COPY migrations ./migrations
COPY lessons ./lessons
COPY templates ./templates
COPY static ./static
RUN pybabel -q compile -d app/locales -D messages
USER rendezvous
ENV RDV_ENVIRONMENT=production \
    RDV_GRADING_BACKEND=procrastinate
EXPOSE 8000
# Migrations run once per deployment in their own service (`python -m app migrate`); compose
# holds the healthchecks (GET /healthz here, `python -m grader.heartbeat` for workers).
CMD ["python", "-m", "app", "serve", "--host", "0.0.0.0", "--port", "8000", "--no-migrate"]

# ---- grader workers and sandbox containers: only the grader package and what it imports ----
FROM python-base AS grader
RUN pip-locked '.[grader]' && rm -rf /tmp/build-local build
COPY grader ./grader
ENV RDV_SANDBOX=docker \
    RDV_SANDBOX_IMAGE=rendezvous-grader:0.1.0 \
    RDV_SANDBOX_DOCKER_USER=10001:10001 \
    RDV_JOBS_DIR=/var/lib/rendezvous/jobs
# The worker runs as rendezvous (uid 10001), not root. It needs the Docker engine's socket to
# start sandboxes, so compose adds the socket's group (DOCKER_GID): whoever controls that socket
# controls the host (README "Running at scale" states the risk). The sandboxes run as the same
# uid with no network, no capabilities and a read-only root.
USER rendezvous
ENTRYPOINT ["python", "-m", "grader.worker"]
CMD ["--queue", "cpu"]

FROM grader AS grader-gpu
USER root
# PyPI's Linux torch wheel is the CUDA build; it replaces the CPU wheel at the version the lock
# pins, with the CUDA libraries it needs (those are not in the lock). Never built here (no GPU).
RUN torch_pin=$(grep '^torch==' requirements.lock) \
 && pip install --force-reinstall --no-deps "$torch_pin" \
 && pip install "$torch_pin"
USER rendezvous
ENV RDV_SANDBOX_IMAGE=rendezvous-grader-gpu:0.1.0
CMD ["--queue", "gpu"]
